// The socket side of a daemon connection (connection.h).
#include "connection.h"

#include <algorithm>
#include <cstdint>

namespace actorflow::net {
namespace {

constexpr size_t kReadChunk = 256 * 1024;
// A payload window at least this large is read into directly, skipping the read buffer.
constexpr size_t kDirectReadMin = 16 * 1024;

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

std::shared_ptr<Connection> Connection::create(asio::ip::tcp::socket socket, Handshake handshake,
                                               ConnectionOptions options, std::string label) {
  return std::shared_ptr<Connection>(new Connection(std::move(socket), std::move(handshake), options, std::move(label)));
}

Connection::Connection(asio::ip::tcp::socket socket, Handshake handshake, ConnectionOptions options, std::string label)
    : socket_(std::move(socket)), handshake_(std::move(handshake)), options_(options), label_(std::move(label)),
      reader_(kMaxPreAuthFrameBytes), handshake_timer_(socket_.get_executor()),
      heartbeat_timer_(socket_.get_executor()) {
  if (options_.tls) tls_ = std::make_unique<asio::ssl::stream<asio::ip::tcp::socket&>>(socket_, *options_.tls);
}

Connection::~Connection() = default;

void Connection::start(Handlers handlers) {
  handlers_ = std::move(handlers);
  asio::dispatch(socket_.get_executor(), [self = shared_from_this()] {
    std::error_code ec;
    self->socket_.set_option(asio::ip::tcp::no_delay(true), ec);
    self->last_rx_ = std::chrono::steady_clock::now();
    self->handshake_timer_.expires_after(std::chrono::milliseconds(self->options_.handshake_timeout_ms));
    self->handshake_timer_.async_wait([w = std::weak_ptr<Connection>(self)](std::error_code ec) {
      auto c = w.lock();
      if (!ec && c && !c->handshake_.done())
        c->do_close(deadline_exceeded("the handshake did not finish within " +
                                      std::to_string(c->options_.handshake_timeout_ms) + " ms"));
    });
    if (!self->tls_) return self->begin();
    auto role = self->options_.tls_server ? asio::ssl::stream_base::server : asio::ssl::stream_base::client;
    self->tls_->async_handshake(role, [self](std::error_code ec) {
      if (self->closed_) return;
      if (ec) return self->do_close(Status(Code::unavailable, "the TLS handshake with " + self->label_ + " failed: " + ec.message()));
      self->begin();
    });
  });
}

void Connection::begin() {
  queue_write(encode_message(handshake_.hello()));
  read_more();
}

void Connection::send(Message m) { (void)send_checked(m); }

Status Connection::send_checked(const Message& m) {
  // Encoding happens on the caller's thread: a large body does not hold the io thread
  // (a large tensor is not copied at all: it goes into the payload).
  auto frame = std::make_shared<OutFrame>(encode_message(m));
  size_t head = kFrameHeaderBytes + (frame->payload.empty() ? 0 : kPayloadLengthBytes);
  uint64_t total = frame->head.size() - head + frame->payload_bytes();
  uint64_t limit = std::min<uint64_t>(UINT32_MAX - 7, options_.max_message_bytes);
  // Read once the handshake is done (the caller waited for it), and never changed after.
  if (uint64_t peer = handshake_.peer_max_message_bytes(); peer > 0) limit = std::min(limit, peer);
  if (total > limit)
    return resource_exhausted(std::string(message_name(m)) + " of " + std::to_string(total) +
                              " bytes is over the largest frame " + label_ + " accepts (" + std::to_string(limit) +
                              " bytes; see the daemon's --max_message_bytes)");
  asio::post(socket_.get_executor(), [self = shared_from_this(), frame] {
    if (!self->closed_) self->queue_write(std::move(*frame));
  });
  return Status::OK();
}

void Connection::close(Status why) {
  asio::post(socket_.get_executor(), [self = shared_from_this(), why] { self->do_close(why); });
}

void Connection::close_after_writes(Status why, int grace_ms) {
  asio::post(socket_.get_executor(), [self = shared_from_this(), why, grace_ms] {
    if (self->closed_) return;
    if (self->writes_.empty()) return self->do_close(why);
    self->closing_ = true;
    self->closing_why_ = why;
    self->handshake_timer_.cancel();
    self->handshake_timer_.expires_after(std::chrono::milliseconds(grace_ms));
    self->handshake_timer_.async_wait([w = std::weak_ptr<Connection>(self)](std::error_code ec) {
      if (auto c = w.lock(); c && !ec) c->do_close(c->closing_why_);
    });
  });
}

void Connection::do_close(Status why) {
  if (closed_) return;
  closed_ = true;
  handshake_timer_.cancel();
  heartbeat_timer_.cancel();
  std::error_code ec;
  socket_.shutdown(asio::ip::tcp::socket::shutdown_both, ec);
  socket_.close(ec);
  writes_.clear();
  pending_.reset();
  if (handlers_.on_closed) handlers_.on_closed(why);
}

void Connection::read_more() {
  if (closed_) return;
  auto on_error = [this](std::error_code ec) {
    do_close(Status(Code::unavailable, ec == asio::error::eof ? std::string("the peer closed the connection")
                                                              : "connection lost: " + ec.message()));
  };
  if (PayloadTarget w = reader_.payload_window(); w.size >= kDirectReadMin) {
    auto on_payload = [self = shared_from_this(), on_error](std::error_code ec, size_t n) {
      if (self->closed_) return;
      if (ec) return on_error(ec);
      self->last_rx_ = std::chrono::steady_clock::now();
      if (Status s = self->reader_.payload_received(n); !s.ok()) return self->do_close(s);
      if (self->reader_.payload_done())
        if (Status s = self->on_payload_done(); !s.ok()) return self->do_close(s);
      self->read_more();
    };
    if (tls_) tls_->async_read_some(asio::buffer(w.data, w.size), std::move(on_payload));
    else socket_.async_read_some(asio::buffer(w.data, w.size), std::move(on_payload));
    return;
  }
  // Before authentication, exactly what the reader still wants; after, big reads.
  size_t want = handshake_.done() ? kReadChunk : std::min(reader_.wanted(), kMaxPreAuthFrameBytes);
  if (buffer_.size() < want) buffer_.resize(handshake_.done() ? kReadChunk : kMaxPreAuthFrameBytes);
  auto on_read = [self = shared_from_this(), on_error](std::error_code ec, size_t n) {
    if (self->closed_) return;
    if (ec) return on_error(ec);
    self->last_rx_ = std::chrono::steady_clock::now();
    if (!self->handshake_.done() && (self->preauth_bytes_ += n) > kMaxPreAuthFrameBytes)
      return self->do_close(resource_exhausted("more than " + std::to_string(kMaxPreAuthFrameBytes) +
                                               " bytes before authenticating"));
    self->on_bytes(n);
    self->read_more();
  };
  if (tls_) tls_->async_read_some(asio::buffer(buffer_.data(), want), std::move(on_read));
  else socket_.async_read_some(asio::buffer(buffer_.data(), want), std::move(on_read));
}

void Connection::on_bytes(size_t n) {
  size_t pos = 0;
  while (pos < n && !closed_) {
    std::optional<RawFrame> frame;
    auto used = reader_.consume(buffer_.data() + pos, n - pos, &frame);
    if (!used.ok()) return do_close(used.status());
    pos += *used;
    if (frame) {
      Status s = on_frame(std::move(*frame));
      if (!s.ok()) return do_close(s);
    }
    if (reader_.payload_done())
      if (Status s = on_payload_done(); !s.ok()) return do_close(s);
  }
}

Status Connection::on_frame(RawFrame&& frame) {
  std::vector<PayloadTarget> payload;
  if (!handshake_.done()) {
    AF_ASSIGN_OR_RETURN(Message m, decode_message(frame, kMaxPreAuthFrameBytes, &payload));
    AF_ASSIGN_OR_RETURN(std::vector<Message> replies, handshake_.on_message(m));
    for (auto& r : replies) queue_write(encode_message(r));
    if (handshake_.done()) {
      handshake_timer_.cancel();
      reader_.set_max_body_bytes(options_.max_message_bytes);
      reader_.allow_payloads(true);
      arm_heartbeat();
      if (handlers_.on_ready) handlers_.on_ready(handshake_.peer());
    }
    return Status::OK();
  }
  AF_ASSIGN_OR_RETURN(Message m, decode_message(frame, options_.max_message_bytes + kFrameHeaderBytes, &payload));
  if (frame.payload_bytes == 0) return deliver(std::move(m));
  pending_ = std::move(m);
  return reader_.place_payload(std::move(payload));
}

Status Connection::on_payload_done() {
  if (!pending_) return internal_error("a payload ended with no frame waiting for it");
  Message m = std::move(*pending_);
  pending_.reset();
  return deliver(std::move(m));
}

Status Connection::deliver(Message&& m) {
  if (std::holds_alternative<HeartbeatMsg>(m)) return Status::OK();
  if (std::holds_alternative<HelloMsg>(m) || std::holds_alternative<AuthProofMsg>(m) ||
      std::holds_alternative<WelcomeMsg>(m))
    return data_loss(std::string(message_name(m)) + " frame after the handshake");
  if (handlers_.on_message) handlers_.on_message(std::move(m));
  return Status::OK();
}

void Connection::queue_write(OutFrame frame) {
  writes_.push_back(std::move(frame));
  if (!writing_) write_next();
}

void Connection::write_next() {
  if (closed_ || writes_.empty()) {
    writing_ = false;
    if (closing_ && !closed_) do_close(closing_why_);
    return;
  }
  writing_ = true;
  auto on_written = [self = shared_from_this()](std::error_code ec, size_t) {
    if (self->closed_) return;
    if (ec) return self->do_close(Status(Code::unavailable, "connection lost while writing: " + ec.message()));
    self->writes_.pop_front();
    self->write_next();
  };
  const OutFrame& f = writes_.front();
  std::vector<asio::const_buffer> buffers;
  buffers.reserve(1 + f.payload.size());
  buffers.emplace_back(f.head.data(), f.head.size());
  for (auto& p : f.payload) buffers.emplace_back(p.data, p.size);
  if (tls_) asio::async_write(*tls_, buffers, std::move(on_written));
  else asio::async_write(socket_, buffers, std::move(on_written));
}

void Connection::arm_heartbeat() {
  heartbeat_timer_.expires_after(std::chrono::milliseconds(options_.heartbeat_ms));
  heartbeat_timer_.async_wait([w = std::weak_ptr<Connection>(shared_from_this())](std::error_code ec) {
    auto self = w.lock();
    if (ec || !self || self->closed_) return;
    auto silent = std::chrono::steady_clock::now() - self->last_rx_;
    if (silent > std::chrono::milliseconds(self->options_.idle_timeout_ms))
      return self->do_close(Status(Code::unavailable, "the peer sent nothing for " +
                                                          std::to_string(self->options_.idle_timeout_ms) +
                                                          " ms (no heartbeat): taken as dead"));
    // Only when idle on our side: a long write already shows we are alive.
    if (self->writes_.empty()) self->queue_write(encode_message(HeartbeatMsg{now_ms()}));
    self->arm_heartbeat();
  });
}

}  // namespace actorflow::net
