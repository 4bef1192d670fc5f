#include "http_server.h"

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <array>
#include <charconv>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

namespace serve {

namespace af = actorflow;
namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using Clock = std::chrono::steady_clock;
// Each connection lives on one io_context run by one thread, so its handlers never run
// at once and need no strand; the executor's type is spelled out rather than erased
// (any_executor), whose copies per operation took atomic reference counts.
using Executor = net::io_context::executor_type;
using Socket = net::basic_stream_socket<tcp, Executor>;
using Timer = net::basic_waitable_timer<Clock, net::wait_traits<Clock>, Executor>;

namespace {

// What every connection shares.
struct Shared {
  HttpOptions options;
  RestApi& api;
  Metrics& metrics;
  std::atomic<bool> draining{false};
  std::atomic<int64_t> in_flight{0};  // from the request read (or refused) to its answer written
  // Admitted requests and the body bytes their headers announced (see HttpOptions).
  std::atomic<int64_t> admitted{0};
  std::atomic<uint64_t> admitted_bytes{0};
  std::function<void()> drained;  // called when draining and the last request is answered
  std::mutex log_mu;
};

// The head of an answer as Beast wrote it (same fields, same order), built into `out`.
void write_head(std::string& out, unsigned version, int status, std::string_view content_type, bool keep, size_t body_bytes) {
  out.clear();
  out += version == 10 ? "HTTP/1.0 " : "HTTP/1.1 ";
  char num[24];
  auto n = std::to_chars(num, num + sizeof num, status).ptr;
  out.append(num, n);
  out += ' ';
  auto reason = http::obsolete_reason(static_cast<http::status>(status));
  out.append(reason.data(), reason.size());
  out += "\r\nServer: actorflow-serve\r\nContent-Type: ";
  out += content_type;
  out += "\r\n";
  if (status == 401) out += "WWW-Authenticate: Bearer\r\n";
  // HTTP/1.1 keeps a connection unless told; HTTP/1.0 closes it unless told.
  if (version == 11 && !keep) out += "Connection: close\r\n";
  if (version == 10 && keep) out += "Connection: keep-alive\r\n";
  out += "Content-Length: ";
  n = std::to_chars(num, num + sizeof num, body_bytes).ptr;
  out.append(num, n);
  out += "\r\n\r\n";
}

// A request target as it goes into the log: printable, and not the whole of a long one.
std::string loggable(std::string_view s) {
  std::string out;
  for (char c : s.substr(0, 256)) out += (c >= 0x20 && c < 0x7f && c != '"') ? c : '?';
  if (s.size() > 256) out += "...";
  return out;
}

// A connection's read buffer: one read takes a request of up to this much whole.
constexpr size_t kReadBufferBytes = 16u << 10;

// What a refused request's client may still send is read and dropped up to this.
constexpr size_t kLingerBytes = 64u << 20;

// Compares in time independent of where the first difference is.
bool same_token(std::string_view a, std::string_view b) {
  unsigned diff = a.size() != b.size();
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i]) ^ static_cast<unsigned char>(b[i % std::max<size_t>(1, b.size())]);
  return diff == 0;
}

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(Socket socket, Shared& shared) : socket_(std::move(socket)), timer_(socket_.get_executor()), sh_(shared) {
    beast::error_code ec;
    auto ep = socket_.remote_endpoint(ec);
    peer_ = ec ? std::string("?") : ep.address().to_string() + ":" + std::to_string(ep.port());
    // Beast reads at most the buffer's free room (and at least 512 bytes) per call, and a
    // buffer the parser empties into the body never grows past that: a 3.5 KB predict
    // took 7 recvmsg calls. Room for a typical request up front makes it one.
    buffer_.reserve(kReadBufferBytes);
  }

  ~Connection() { release(); }

  void start() { net::dispatch(socket_.get_executor(), beast::bind_front_handler(&Connection::read, shared_from_this())); }

 private:
  void read() {
    if (sh_.draining) return close();
    parser_.emplace();
    parser_->body_limit(sh_.options.max_body_bytes);
    expires_after(std::chrono::milliseconds(sh_.options.read_timeout_ms));
    http::async_read_header(socket_, buffer_, *parser_, beast::bind_front_handler(&Connection::on_header, shared_from_this()));
  }

  // The read and write deadline: past it, the socket is closed, which ends the operation
  // under way with an error (and the connection with it). One timer per connection
  // rather than one per operation: moving the deadline later, as every request does,
  // costs a clock read; the timer fires at the old time and waits again for the new.
  void expires_after(Clock::duration d) { set_deadline(Clock::now() + d); }
  void no_deadline() { deadline_ = Clock::time_point::max(); }
  void set_deadline(Clock::time_point when) {
    deadline_ = when;
    if (closed_ || (timer_armed_ && timer_.expiry() <= when)) return;
    timer_armed_ = true;
    timer_.expires_at(when);  // a wait for a later time ends now, superseded
    timer_.async_wait([self = shared_from_this(), generation = ++timer_generation_](beast::error_code) { self->on_timer(generation); });
  }
  void on_timer(unsigned generation) {
    if (generation != timer_generation_) return;  // a newer wait is pending
    timer_armed_ = false;
    if (closed_ || deadline_ == Clock::time_point::max()) return;
    if (Clock::now() < deadline_) return set_deadline(deadline_);
    // A client too slow to send its request or to take its answer.
    beast::error_code ignored;
    socket_.close(ignored);
  }

  // The header alone first: a body over the limit, a request without the token and one
  // past admission's bounds are refused before the body is read (a client may announce
  // 16 MiB and send it slowly: read first, 20 of them held 330 MB before any 401), and a
  // client that asks "Expect: 100-continue" (curl, for bodies over 1 MiB) is told to go on
  // rather than left waiting a second for permission.
  void on_header(beast::error_code ec, std::size_t) {
    if (failed(ec)) return;
    auto& req = parser_->get();
    if (!authorized(req)) {
      begin(std::string(req.method_string()), std::string(req.target()), req.version());
      // A short linger: an unknown client's body is not worth reading for long.
      return respond(error_response(401, "this server wants 'Authorization: Bearer <token>'"), 1u << 20);
    }
    if (!admit()) {
      begin(std::string(req.method_string()), std::string(req.target()), req.version());
      sh_.metrics.record_overload();
      return respond(error_response(429, "too many requests in flight (--max_in_flight_requests " +
                                             std::to_string(sh_.options.max_in_flight_requests) + ", --max_in_flight_bytes " +
                                             std::to_string(sh_.options.max_in_flight_bytes) + "); try again later"),
                     kLingerBytes);
    }
    auto self = shared_from_this();
    auto body = [self] { http::async_read(self->socket_, self->buffer_, *self->parser_, beast::bind_front_handler(&Connection::on_read, self)); };
    if (!beast::iequals(parser_->get()[http::field::expect], "100-continue") || parser_->is_done()) return body();
    static constexpr std::string_view kContinue10 = "HTTP/1.0 100 Continue\r\n\r\n", kContinue11 = "HTTP/1.1 100 Continue\r\n\r\n";
    net::async_write(socket_, net::buffer(parser_->get().version() == 10 ? kContinue10 : kContinue11),
                     [self, body](beast::error_code wec, std::size_t) {
                       if (wec) return self->close();
                       body();
                     });
  }

  // Answers (or drops) a request that could not be read; false when there was no error.
  bool failed(beast::error_code ec) {
    if (!ec) return false;
    // A closed connection, a client too slow to send its request, a reset: nothing to answer.
    if (ec == http::error::end_of_stream || ec == beast::error::timeout || ec == net::error::operation_aborted ||
        ec.category() != http::make_error_code(http::error::bad_target).category()) {
      close();
      return true;
    }
    begin(parser_->is_header_done() ? std::string(parser_->get().method_string()) : "-",
          parser_->is_header_done() ? std::string(parser_->get().target()) : "-", 11);
    if (ec == http::error::body_limit)
      respond(error_response(413, "the body is over --max_body_bytes (" + std::to_string(sh_.options.max_body_bytes) + " bytes)"),
              kLingerBytes);
    else if (ec == http::error::header_limit)
      respond(error_response(431, "the request's header is too large"), kLingerBytes);
    else
      respond(error_response(400, "malformed HTTP request: " + ec.message()), kLingerBytes);
    return true;
  }

  bool authorized(const http::request<http::string_body>& req) const {
    if (sh_.options.auth_token.empty()) return true;
    auto field = req[http::field::authorization];
    std::string_view auth(field.data(), field.size());
    return auth.size() >= 7 && beast::iequals(beast::string_view(auth.data(), 7), "Bearer ") && same_token(auth.substr(7), sh_.options.auth_token);
  }

  // Counts the request in flight, with the body bytes its header announces; false (and
  // nothing counted) when that would pass a bound.
  bool admit() {
    uint64_t bytes = 0;
    if (auto n = parser_->content_length()) bytes = *n;
    else if (parser_->chunked()) bytes = sh_.options.max_body_bytes;
    int64_t n = ++sh_.admitted;
    uint64_t b = sh_.admitted_bytes += bytes;
    if (n > sh_.options.max_in_flight_requests || (n > 1 && b > sh_.options.max_in_flight_bytes)) {
      --sh_.admitted;
      sh_.admitted_bytes -= bytes;
      return false;
    }
    admitted_ = true;
    admitted_bytes_ = bytes;
    return true;
  }
  // Once the answer is ready to write, or the connection is gone.
  void release() {
    if (!admitted_) return;
    admitted_ = false;
    --sh_.admitted;
    sh_.admitted_bytes -= admitted_bytes_;
  }

  void on_read(beast::error_code ec, std::size_t) {
    if (failed(ec)) return;
    auto& req = parser_->get();
    begin(std::string(req.method_string()), std::string(req.target()), req.version());
    keep_alive_ = req.keep_alive();
    HttpRequest r{method_, target_, std::move(req.body())};
    // While the request is answered the client owes us nothing.
    no_deadline();
    auto self = shared_from_this();
    // The API replies on this connection's thread (through `post` when from a batch
    // worker), so the answer is written right away.
    sh_.api.handle(
        std::move(r), [self](HttpResponse resp) { self->respond(std::move(resp)); },
        [self](std::function<void()> task) { net::dispatch(self->socket_.get_executor(), std::move(task)); });
  }

  // From here until its answer is written, the request is in flight: a drain waits for it.
  void begin(std::string method, std::string target, unsigned version) {
    ++sh_.in_flight;
    started_ = Clock::now();
    method_ = std::move(method);
    target_ = std::move(target);
    version_ = version == 10 ? 10 : 11;
    keep_alive_ = false;
  }

  // `linger`: the client may still be sending a body we will not read; stop sending,
  // then swallow (into a fixed buffer) up to that many bytes of what it sends for a
  // while, so that it sees our answer rather than a reset.
  void respond(HttpResponse r, size_t linger = 0) {
    bool keep = keep_alive_ && !linger && !sh_.draining;
    // The head is written by hand into a buffer the connection keeps, and goes out with
    // the body in one gather write: no response object, field list or serializer per answer.
    write_head(head_, version_, r.status, r.content_type, keep, r.body.size());
    body_ = std::move(r.body);
    status_ = r.status;
    bytes_ = body_.size();
    // Counted before the write: a client that has read its answer then finds it in /metrics.
    seconds_ = std::chrono::duration<double>(Clock::now() - started_).count();
    sh_.metrics.record_request(status_, seconds_);
    // And out of admission's count: a client that has its answer may send the next
    // request at once (the write's completion runs later, perhaps after that request).
    release();
    expires_after(std::chrono::milliseconds(sh_.options.read_timeout_ms));
    std::array<net::const_buffer, 2> out{net::buffer(head_), net::buffer(body_)};
    net::async_write(socket_, out, [self = shared_from_this(), keep, linger](beast::error_code ec, std::size_t) {
      self->on_write(ec, keep, linger);
    });
  }

  void on_write(beast::error_code ec, bool keep, size_t linger) {
    double seconds = seconds_;
    if (sh_.options.access_log) {
      std::time_t now = std::time(nullptr);
      char when[32];
      std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
      std::lock_guard<std::mutex> lock(sh_.log_mu);
      std::fprintf(stdout, "%s %s \"%s %s\" %d %zu %.3fms\n", when, peer_.c_str(), loggable(method_).c_str(),
                   loggable(target_).c_str(), status_, bytes_, seconds * 1e3);
      std::fflush(stdout);
    }
    if (--sh_.in_flight == 0 && sh_.draining) sh_.drained();
    // A large answer's buffer is not kept for the next one.
    if (body_.capacity() > kReadBufferBytes) std::string().swap(body_);
    if (ec) return close();
    if (linger) return start_linger(linger);
    if (!keep) return close();
    read();
  }

  void start_linger(size_t limit) {
    beast::error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_send, ignored);
    expires_after(std::chrono::seconds(2));
    linger_more(limit);
  }
  void linger_more(size_t limit) {
    socket_.async_read_some(net::buffer(discard_), [self = shared_from_this(), limit](beast::error_code ec, std::size_t n) {
      self->lingered_ += n;
      if (ec || self->lingered_ > limit) return self->close();
      self->linger_more(limit);
    });
  }

  void close() {
    release();
    closed_ = true;
    timer_.cancel();
    beast::error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_both, ignored);
    socket_.close(ignored);
  }

  Socket socket_;
  Timer timer_;
  Clock::time_point deadline_ = Clock::time_point::max();
  bool timer_armed_ = false, closed_ = false;
  unsigned timer_generation_ = 0;
  Shared& sh_;
  std::string head_, body_;  // the answer being written
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::string peer_, method_, target_;
  unsigned version_ = 11;
  bool keep_alive_ = false;
  int status_ = 0;
  size_t bytes_ = 0;
  double seconds_ = 0;  // from the request read to its answer ready
  Clock::time_point started_;
  std::array<char, 16384> discard_;
  size_t lingered_ = 0;
  bool admitted_ = false;
  uint64_t admitted_bytes_ = 0;
};

}  // namespace

struct HttpServer::Impl {
  Impl(HttpOptions options, RestApi& api, Metrics& metrics)
      : shared{std::move(options), api, metrics},
        iocs(make_contexts(shared.options.io_threads)),
        ioc(*iocs[0]),
        acceptor(ioc),
        signals(ioc, SIGTERM, SIGINT),
        drain_timer(ioc),
        retry_timer(ioc) {}

  // One io_context per HTTP thread (concurrency hint 1: one thread runs it), and
  // connections spread over them in turn.
  static std::vector<std::unique_ptr<net::io_context>> make_contexts(int threads) {
    std::vector<std::unique_ptr<net::io_context>> out;
    for (int i = 0; i < std::max(1, threads); ++i) out.push_back(std::make_unique<net::io_context>(1));
    return out;
  }
  void stop_all() {
    for (auto& c : iocs) c->stop();
  }

  void accept() {
    next_socket.emplace(iocs[next_context++ % iocs.size()]->get_executor());
    acceptor.async_accept(*next_socket, [this](beast::error_code ec) {
      if (!acceptor.is_open() || shared.draining) return;
      if (!ec) {
        std::make_shared<Connection>(std::move(*next_socket), shared)->start();
        return accept();
      }
      // Out of descriptors or the like: try again shortly rather than spin.
      retry_timer.expires_after(std::chrono::milliseconds(50));
      retry_timer.async_wait([this](beast::error_code) { accept(); });
    });
  }

  void drain(int sig) {
    std::fprintf(stderr, "[actorflow-serve] %s: no new connections; answering the %lld requests in flight\n",
                 sig == SIGTERM ? "SIGTERM" : "SIGINT", static_cast<long long>(shared.in_flight.load()));
    shared.draining = true;
    beast::error_code ignored;
    acceptor.close(ignored);
    retry_timer.cancel();
    if (shared.in_flight == 0) return stop_all();
    drain_timer.expires_after(std::chrono::milliseconds(shared.options.drain_timeout_ms));
    drain_timer.async_wait([this](beast::error_code ec) {
      if (!ec) stop_all();
    });
  }

  // Before the io_contexts: destroying them destroys the handlers still queued, and with
  // them connections that give their admission back to `shared`.
  Shared shared;
  std::vector<std::unique_ptr<net::io_context>> iocs;
  net::io_context& ioc;  // the first: accepts, and takes the signals
  size_t next_context = 0;
  std::optional<Socket> next_socket;  // the one the acceptor fills next
  tcp::acceptor acceptor;
  net::signal_set signals;
  net::steady_timer drain_timer, retry_timer;
};

HttpServer::HttpServer(HttpOptions options, RestApi& api, Metrics& metrics)
    : impl_(std::make_unique<Impl>(std::move(options), api, metrics)) {
  impl_->shared.drained = [impl = impl_.get()] { net::post(impl->ioc, [impl] { impl->stop_all(); }); };
}

HttpServer::~HttpServer() = default;

af::Status HttpServer::listen() {
  beast::error_code ec;
  auto address = net::ip::make_address(impl_->shared.options.host, ec);
  if (ec) return af::invalid_argument("--host '" + impl_->shared.options.host + "' is not an IP address: " + ec.message());
  tcp::endpoint ep(address, static_cast<uint16_t>(impl_->shared.options.port));
  auto& a = impl_->acceptor;
  a.open(ep.protocol(), ec);
  if (!ec) a.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) a.bind(ep, ec);
  if (!ec) a.listen(net::socket_base::max_listen_connections, ec);
  if (ec) return af::Status(af::Code::unavailable, "cannot listen on " + impl_->shared.options.host + ":" +
                                                       std::to_string(impl_->shared.options.port) + ": " + ec.message());
  return af::Status::OK();
}

int HttpServer::port() const {
  beast::error_code ec;
  auto ep = impl_->acceptor.local_endpoint(ec);
  return ec ? -1 : ep.port();
}

int64_t HttpServer::run() {
  impl_->signals.async_wait([this](beast::error_code ec, int sig) {
    if (!ec) impl_->drain(sig);
  });
  impl_->accept();
  std::vector<std::thread> threads;
  // The other contexts have no work of their own until a connection comes: a guard keeps
  // their run() from returning at once.
  std::vector<net::executor_work_guard<Executor>> guards;
  for (size_t i = 1; i < impl_->iocs.size(); ++i) {
    guards.push_back(net::make_work_guard(*impl_->iocs[i]));
    threads.emplace_back([this, i] { impl_->iocs[i]->run(); });
  }
  impl_->ioc.run();
  // Whatever ended the first context's run (stop_all() after a drain, or running out of
  // work), the others end too rather than hold the join below.
  impl_->stop_all();
  for (auto& t : threads) t.join();
  return impl_->shared.in_flight.load();
}

}  // namespace serve
