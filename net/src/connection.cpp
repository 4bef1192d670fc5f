// The socket side of a daemon connection (connection.h).
#include "connection.h"

#include "spin_wait.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>

namespace actorflow::net {
namespace {

constexpr size_t kReadChunk = 256 * 1024;
constexpr size_t kMaxWriteOffer = size_t{16} << 20;
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
  if (options_.tls) {
    tls_ = std::make_unique<asio::ssl::stream<asio::ip::tcp::socket&>>(socket_, *options_.tls);
    if (!options_.tls_server && !options_.tls_host.empty())
      tls_->set_verify_callback(asio::ssl::host_name_verification(options_.tls_host));
  }
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

Result<std::shared_ptr<OutFrame>> Connection::encode_checked(const Message& m) const {
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
  return frame;
}

bool Connection::on_loop_thread() {
  // target() points into the executor it is called on: keep that one alive.
  auto executor = socket_.get_executor();
  auto* ex = executor.target<asio::io_context::executor_type>();
  return ex && ex->running_in_this_thread();
}

void Connection::posted() {
  if (post_hook_) post_hook_();
}

Status Connection::send_checked(const Message& m) {
  AF_ASSIGN_OR_RETURN(auto frame, encode_checked(m));
  if (on_loop_thread()) {
    // On the io thread (a step answered there): write now, not after a round of the loop.
    if (!closed_) queue_write(std::move(*frame));
    return Status::OK();
  }
  std::unique_lock<std::mutex> lock(write_mu_);
  if (write_closed_) return Status::OK();  // dropped, as on a closed connection
  if (direct_ok_.load(std::memory_order_acquire) && !writing_ && writes_.empty()) {
    // Nothing queued: write it now from this thread (under the lock, so the io thread
    // neither writes nor closes the socket meanwhile), with no hand-off to the io thread.
    writes_.push_back(std::move(*frame));
    auto all = write_front_now();
    if (all.ok() && *all) {
      writes_.pop_front();
      front_written_ = 0;
      return Status::OK();
    }
    // The rest (or the error) is the io thread's.
  } else {
    // Behind the frames already queued, in the order of these calls.
    writes_.push_back(std::move(*frame));
    if (writing_) return Status::OK();
  }
  writing_ = true;
  lock.unlock();
  asio::post(socket_.get_executor(), [self = shared_from_this()] { self->write_next(); });
  posted();
  return Status::OK();
}

Status Connection::send_owned(const Message& m) {
  AF_ASSIGN_OR_RETURN(auto frame, encode_checked(m));
  if (closed_) return Status(Code::unavailable, "the connection to " + label_ + " is closed");
  queue_write(std::move(*frame));
  return Status::OK();
}

bool Connection::can_read_owned() const {
  return !tls_ && handshake_.done() && !closed_ && !read_direct_ && socket_.is_open();
}

Result<Connection::Wait> Connection::read_owned(std::chrono::steady_clock::time_point until, int kick_fd,
                                                bool wait_first) {
  int fd = socket_.native_handle();
  // Poll the socket for a while before sleeping on it (spin_wait.h); with no budget, a
  // caller that just sent its request sleeps before its first read.
  SpinWait spin(default_spin_budget());
  if (default_spin_budget().count() > 0) wait_first = false;
  for (;; wait_first = false) {
    if (closed_) return Status(Code::unavailable, "the connection to " + label_ + " is closed");
    // A large payload is read straight into its tensor, the rest into buffer_ (the read
    // pending on the io_context targets it too, or waits: can_read_owned; keep its size).
    PayloadTarget w = reader_.payload_window();
    bool direct = w.size >= kDirectReadMin;
    ssize_t n = wait_first ? -1
                           : ::recv(fd, direct ? w.data : buffer_.data(), direct ? w.size : buffer_.size(), MSG_DONTWAIT);
    if (wait_first) errno = EAGAIN;
    if (n > 0 && direct) {
      last_rx_ = std::chrono::steady_clock::now();
      Status s = reader_.payload_received(static_cast<size_t>(n));
      if (s.ok() && reader_.payload_done()) s = on_payload_done();
      if (!s.ok()) {
        do_close(s);
        return s;
      }
      if (closed_) return Status(Code::unavailable, "the connection to " + label_ + " closed");
      return Wait::data;
    }
    if (n > 0) {
      last_rx_ = std::chrono::steady_clock::now();
      on_bytes(static_cast<size_t>(n));
      if (closed_) return Status(Code::unavailable, "the connection to " + label_ + " closed");
      return Wait::data;
    }
    if (n == 0) {
      Status s(Code::unavailable, "the peer closed the connection");
      do_close(s);
      return s;
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      Status s(Code::unavailable, std::string("connection lost: ") + std::strerror(errno));
      do_close(s);
      return s;
    }
    auto now = std::chrono::steady_clock::now();
    if (now >= until) return Wait::timeout;
    if (spin.again()) continue;
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(until - now).count() + 1;
    pollfd fds[2] = {{fd, POLLIN, 0}, {kick_fd, POLLIN, 0}};
    int r = ::poll(fds, kick_fd >= 0 ? 2 : 1, static_cast<int>(std::min<int64_t>(ms, 1 << 30)));
    if (r < 0 && errno != EINTR) {
      Status s(Code::internal, std::string("poll failed: ") + std::strerror(errno));
      do_close(s);
      return s;
    }
    if (r > 0 && kick_fd >= 0 && (fds[1].revents & POLLIN)) {
      eventfd_t v;
      (void)::eventfd_read(kick_fd, &v);
      return Wait::kicked;
    }
    if (r == 0) return Wait::timeout;
  }
}

void Connection::close(Status why) {
  asio::post(socket_.get_executor(), [self = shared_from_this(), why] { self->do_close(why); });
  posted();
}

void Connection::close_after_writes(Status why, int grace_ms) {
  asio::post(socket_.get_executor(), [self = shared_from_this(), why, grace_ms] {
    if (self->closed_) return;
    if (self->writes_idle()) return self->do_close(why);
    self->closing_ = true;
    self->closing_why_ = why;
    self->handshake_timer_.cancel();
    self->handshake_timer_.expires_after(std::chrono::milliseconds(grace_ms));
    self->handshake_timer_.async_wait([w = std::weak_ptr<Connection>(self)](std::error_code ec) {
      if (auto c = w.lock(); c && !ec) c->do_close(c->closing_why_);
    });
  });
  posted();
}

void Connection::do_close(Status why) {
  if (closed_) return;
  closed_ = true;
  handshake_timer_.cancel();
  heartbeat_timer_.cancel();
  {
    // Under the lock: a writer of another thread never uses a closed (or reused) socket.
    std::lock_guard<std::mutex> lock(write_mu_);
    write_closed_ = true;
    std::error_code ec;
    socket_.shutdown(asio::ip::tcp::socket::shutdown_both, ec);
    socket_.close(ec);
    writes_.clear();
    front_written_ = 0;
  }
  pending_.reset();
  if (handlers_.on_closed) handlers_.on_closed(why);
}

void Connection::read_more() {
  if (closed_) return;
  auto on_error = [this](std::error_code ec) {
    do_close(Status(Code::unavailable, ec == asio::error::eof ? std::string("the peer closed the connection")
                                                              : "connection lost: " + ec.message()));
  };
  read_direct_ = false;
  if (PayloadTarget w = reader_.payload_window(); w.size >= kDirectReadMin) {
    read_direct_ = true;
    auto on_payload = [self = shared_from_this(), on_error, size = w.size](std::error_code ec, size_t n) {
      if (self->closed_) return;
      if (ec) return on_error(ec);
      self->last_rx_ = std::chrono::steady_clock::now();
      self->drained_ = n < size;
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
  if (drained_ && handshake_.done() && !tls_) return read_when_ready();
  auto on_read = [self = shared_from_this(), on_error, want](std::error_code ec, size_t n) {
    if (self->closed_) return;
    if (ec) return on_error(ec);
    self->last_rx_ = std::chrono::steady_clock::now();
    self->drained_ = self->handshake_.done() && n < want;
    if (!self->handshake_.done() && (self->preauth_bytes_ += n) > kMaxPreAuthFrameBytes)
      return self->do_close(resource_exhausted("more than " + std::to_string(kMaxPreAuthFrameBytes) +
                                               " bytes before authenticating"));
    self->on_bytes(n);
    self->read_more();
  };
  if (tls_) tls_->async_read_some(asio::buffer(buffer_.data(), want), std::move(on_read));
  else socket_.async_read_some(asio::buffer(buffer_.data(), want), std::move(on_read));
}

// Edge-triggered readiness (asio's epoll reactor) is safe here: the last read was short,
// so the socket was empty then, and any byte since has raised a new event (or left one
// not yet collected).
void Connection::read_when_ready() {
  socket_.async_wait(asio::ip::tcp::socket::wait_read, [self = shared_from_this()](std::error_code ec) {
    if (self->closed_) return;
    if (ec)
      return self->do_close(Status(Code::unavailable, ec == asio::error::eof ? std::string("the peer closed the connection")
                                                                             : "connection lost: " + ec.message()));
    ssize_t n = ::recv(self->socket_.native_handle(), self->buffer_.data(), kReadChunk, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return self->read_more();
    if (n < 0) return self->do_close(Status(Code::unavailable, std::string("connection lost: ") + std::strerror(errno)));
    if (n == 0) return self->do_close(Status(Code::unavailable, "the peer closed the connection"));
    self->last_rx_ = std::chrono::steady_clock::now();
    self->drained_ = static_cast<size_t>(n) < kReadChunk;
    self->on_bytes(static_cast<size_t>(n));
    self->read_more();
  });
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
      direct_ok_.store(!tls_, std::memory_order_release);
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
  {
    std::lock_guard<std::mutex> lock(write_mu_);
    if (write_closed_) return;
    writes_.push_back(std::move(frame));
    if (writing_) return;
    writing_ = true;
  }
  write_next();
}

Result<bool> Connection::write_front_now() {
  const OutFrame& f = writes_.front();
  int fd = socket_.native_handle();
  for (;;) {
    // The frame's pieces past what has gone already, at most 64 at a time.
    iovec iov[64];
    int count = 0;
    size_t skip = front_written_, want = 0;
    auto add = [&](const char* data, size_t size) {
      if (count == 64) return;
      if (skip >= size) {
        skip -= size;
        return;
      }
      iov[count].iov_base = const_cast<char*>(data + skip);
      iov[count].iov_len = size - skip;
      want += size - skip;
      skip = 0;
      ++count;
    };
    add(f.head.data(), f.head.size());
    for (auto& p : f.payload) add(p.data, p.size);
    if (count == 0) return true;
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<size_t>(count);
    ssize_t n = ::sendmsg(fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return false;
      return Status(Code::unavailable, std::string("connection lost while writing: ") + std::strerror(errno));
    }
    front_written_ += static_cast<size_t>(n);
    if (static_cast<size_t>(n) < want) return false;
  }
}

// On the io thread, which owns the queue's front while writing_ is set.
void Connection::write_next() {
  std::unique_lock<std::mutex> lock(write_mu_);
  for (;;) {
    if (write_closed_ || writes_.empty()) {
      writing_ = false;
      bool close_now = closing_ && !closed_;
      lock.unlock();
      if (close_now) do_close(closing_why_);
      return;
    }
    writing_ = true;
    if (tls_) break;
    // Plain TCP: the whole frame now, from this thread; most go out in one sendmsg with
    // no handler to run after (asio's async write would try the same, then post its
    // completion, which costs the loop another round and a syscall).
    auto all = write_front_now();
    if (!all.ok()) {
      lock.unlock();
      return do_close(all.status());
    }
    if (!*all) break;
    writes_.pop_front();
    front_written_ = 0;
  }
  auto on_written = [self = shared_from_this()](std::error_code ec, size_t) {
    if (self->closed_) return;
    if (ec) return self->do_close(Status(Code::unavailable, "connection lost while writing: " + ec.message()));
    {
      std::lock_guard<std::mutex> lock(self->write_mu_);
      if (!self->writes_.empty()) self->writes_.pop_front();
      self->front_written_ = 0;
    }
    self->write_next();
  };
  const OutFrame& f = writes_.front();
  std::vector<asio::const_buffer> buffers;
  buffers.reserve(1 + f.payload.size());
  size_t skip = front_written_;
  auto add = [&](const char* data, size_t size) {
    if (skip >= size) {
      skip -= size;
      return;
    }
    buffers.emplace_back(data + skip, size - skip);
    skip = 0;
  };
  add(f.head.data(), f.head.size());
  for (auto& p : f.payload) add(p.data, p.size);
  // asio's transfer_all offers the kernel at most 64 KiB per sendmsg: a tensor of a few
  // megabytes then costs a syscall, a loopback softirq and a wake-up of the reader per
  // 64 KiB. Offer all of it; the kernel takes what fits in the socket's buffer.
  auto all_at_once = [](const std::error_code& ec, size_t) -> size_t { return ec ? 0 : kMaxWriteOffer; };
  // The front stays put while others add behind it (a deque keeps its elements' places).
  lock.unlock();
  if (tls_) asio::async_write(*tls_, buffers, all_at_once, std::move(on_written));
  else asio::async_write(socket_, buffers, all_at_once, std::move(on_written));
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
    if (self->writes_idle()) self->queue_write(encode_message(HeartbeatMsg{now_ms()}));
    self->arm_heartbeat();
  });
}

}  // namespace actorflow::net
