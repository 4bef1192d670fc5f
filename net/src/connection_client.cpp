// The client end of a daemon connection (connection_client.h).
#include "connection_client.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>

#include "actorflow/net/daemon.h"
#include "actorflow/library_threads.h"

namespace actorflow::net {
namespace {

int64_t ms_until(DaemonClient::Clock::time_point t) {
  if (t == DaemonClient::kNoDeadline) return -1;
  return std::max<int64_t>(0, std::chrono::duration_cast<std::chrono::milliseconds>(t - DaemonClient::Clock::now()).count());
}

std::atomic<int> g_heartbeat_ms{ConnectionOptions{}.heartbeat_ms};
std::atomic<int> g_peer_timeout_ms{ConnectionOptions{}.idle_timeout_ms};

}  // namespace

void set_client_heartbeat(int heartbeat_ms, int peer_timeout_ms) {
  if (heartbeat_ms > 0) g_heartbeat_ms = heartbeat_ms;
  if (peer_timeout_ms > 0) g_peer_timeout_ms = peer_timeout_ms;
}

ConnectionOptions client_connection_options() {
  ConnectionOptions o;
  o.heartbeat_ms = g_heartbeat_ms;
  o.idle_timeout_ms = g_peer_timeout_ms;
  return o;
}

Result<std::unique_ptr<DaemonClient>> DaemonClient::connect(const std::string& host, uint16_t port,
                                                            const std::string& token, const std::string& label,
                                                            Clock::time_point deadline, ConnectionOptions options,
                                                            std::string peer_self_address) {
  if (!options.tls) {
    auto tls = client_tls_from_env();
    if (!tls.ok()) return tls.status();
    options.tls = *tls;
  }
  options.tls_server = false;
  options.tls_host = host;
  std::unique_ptr<DaemonClient> c(new DaemonClient(label));
  auto nonce = random_nonce();
  if (!nonce.ok()) return nonce.status();
  // A connection attempt (resolve, TCP connect, handshake) runs on the io thread; this
  // thread waits for its outcome by the deadline.
  asio::ip::tcp::resolver resolver(c->io_);
  asio::ip::tcp::socket socket(c->io_);
  std::optional<std::error_code> connected;
  asio::ip::tcp::endpoint peer;
  resolver.async_resolve(host, std::to_string(port), [&](std::error_code ec, asio::ip::tcp::resolver::results_type r) {
    if (ec) {
      std::lock_guard<std::mutex> lock(c->mu_);
      connected = ec;
      c->cv_.notify_all();
      return;
    }
    asio::async_connect(socket, r, [&](std::error_code ec, const asio::ip::tcp::endpoint& ep) {
      std::lock_guard<std::mutex> lock(c->mu_);
      connected = ec;
      peer = ep;
      c->cv_.notify_all();
    });
  });
  c->io_thread_ = std::thread([raw = c.get()] {
    enter_library_thread("af-client-io");
    raw->io_loop();
  });
  {
    std::unique_lock<std::mutex> lock(c->mu_);
    bool done = deadline == kNoDeadline ? (c->cv_.wait(lock, [&] { return connected.has_value(); }), true)
                                        : c->cv_.wait_until(lock, deadline, [&] { return connected.has_value(); });
    if (!done || *connected) {
      std::string why = done ? connected->message() : "no answer before the deadline";
      lock.unlock();
      // The pending handlers refer to this frame's locals: cancel them and wait for the loop.
      asio::post(c->io_, [&] {
        resolver.cancel();
        std::error_code ignored;
        socket.close(ignored);
      });
      c->work_.reset();
      {
        std::lock_guard<std::mutex> exit_lock(c->mu_);
        c->io_exit_ = true;
        c->io_.stop();
      }
      if (c->io_thread_.joinable()) c->io_thread_.join();
      return Status(done ? Code::unavailable : Code::deadline_exceeded,
                    "cannot connect to the node daemon at " + label + ": " + why);
    }
  }
  // Daemons log clients by this name: which process on which host.
  char host_name[256] = {};
  if (::gethostname(host_name, sizeof host_name - 1) != 0) host_name[0] = '\0';
  std::string me = "pid " + std::to_string(::getpid()) + " on " + (host_name[0] ? host_name : "?");
  // A daemon dialing a peer says so, and names itself by its own address (peer_table.h).
  std::string role = "client";
  if (!peer_self_address.empty()) me = std::move(peer_self_address), role = "daemon";
  Handshake hs(Handshake::Side::client, Identity{role, me, random_incarnation()}, token, *nonce);
  c->conn_ = Connection::create(std::move(socket), std::move(hs), options, label);
  DaemonClient* raw = c.get();
  c->kick_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  c->conn_->set_post_hook([raw] {
    raw->posted_.fetch_add(1);
    if (raw->driving_.load() && raw->kick_fd_ >= 0) (void)::eventfd_write(raw->kick_fd_, 1);
  });
  c->conn_->start(Connection::Handlers{
      [raw](const Identity& peer) {
        std::lock_guard<std::mutex> lock(raw->mu_);
        raw->daemon_ = peer;
        raw->ready_ = true;
        raw->cv_.notify_all();
      },
      [raw](Message&& m) { raw->on_message(std::move(m)); },
      [raw](const Status& why) { raw->on_closed(why); }});
  std::unique_lock<std::mutex> lock(c->mu_);
  Status s = c->wait(lock, deadline, [&] { return c->ready_; }, "authenticating");
  if (!s.ok()) {
    // A hint by how the handshake ended: nothing answered it, or the far end hung up on it
    // (a daemon does that to a wrong token; a refusal on this side says so already).
    if (s.code() == Code::unavailable && c->close_cause_.code() == Code::deadline_exceeded)
      s = Status(Code::unavailable, s.message() + " (nothing at that address answered the handshake: is it an actorflow-node daemon, and is it running?)");
    else if (s.code() == Code::unavailable && s.message().find("ACTORFLOW_TOKEN") == std::string::npos)
      s = Status(Code::unavailable, s.message() + " (the daemon refused the handshake: is ACTORFLOW_TOKEN the same here as on the daemon?)");
    return s;
  }
  return c;
}

int64_t DaemonClient::timeout_ms_until(Clock::time_point deadline) { return std::max<int64_t>(1, ms_until(deadline)); }

void DaemonClient::stop() {
  {
    // No caller drives the loop any more: the io thread runs it to the end.
    std::lock_guard<std::mutex> lock(mu_);
    io_forced_ = true;
    io_cv_.notify_all();
  }
  if (conn_) conn_->close(cancelled("the client closed the connection"));
  work_.reset();
  // Let the close run, then stop the loop whatever is pending.
  asio::post(io_, [this] {
    std::lock_guard<std::mutex> lock(mu_);
    io_exit_ = true;
    io_.stop();
  });
  if (io_thread_.joinable() && io_thread_.get_id() != std::this_thread::get_id()) io_thread_.join();
}

DaemonClient::~DaemonClient() {
  stop();
  if (kick_fd_ >= 0) ::close(kick_fd_);
}

void DaemonClient::io_loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    if (io_exit_) return;
    if (caller_driving_) {
      io_cv_.wait_for(lock, kLinger);
      continue;
    }
    if (!io_wanted()) {
      // A caller drove the loop a moment ago and will likely be back: leave it to them.
      auto until = last_caller_ + kLinger;
      if (Clock::now() < until) {
        io_cv_.wait_until(lock, until);
        continue;
      }
    }
    // Restarted under the lock, so that a caller's stop() (under the lock, once it sees
    // io_running_) cannot come before it and be lost.
    io_.restart();
    io_running_ = true;
    lock.unlock();
    io_.run();
    lock.lock();
    io_running_ = false;
    io_cv_.notify_all();
  }
}

bool DaemonClient::io_wanted() const {
  return io_forced_ || !steps_.empty() || !registrations_.empty() || !watchers_.empty() || !stores_.empty();
}

void DaemonClient::want_io() {
  if (!io_running_ && !caller_driving_) io_cv_.notify_all();
}

std::string DaemonClient::who() const {
  if (daemon_.task.empty()) return "the node daemon at " + label_;
  return "node daemon " + daemon_.task + " at " + label_;
}

Status DaemonClient::wait(std::unique_lock<std::mutex>& lock, Clock::time_point deadline,
                          const std::function<bool()>& ready, const std::string& what) {
  auto done = [&] { return ready() || closed_.has_value(); };
  if (deadline == kNoDeadline) cv_.wait(lock, done);
  else if (!cv_.wait_until(lock, deadline, done))
    return deadline_exceeded(what + " on " + who() + ": no answer before the deadline");
  if (ready()) return Status::OK();
  return Status(closed_->code() == Code::ok ? Code::unavailable : closed_->code(),
                what + " on " + who() + " failed: the connection closed (" + closed_->message() + ")");
}

void DaemonClient::on_message(Message&& m) {
  if (other_ && (std::holds_alternative<EdgeFrameMsg>(m) || std::holds_alternative<CreditMsg>(m))) {
    other_(std::move(m));
    return;
  }
  std::function<void()> watcher;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto* r = std::get_if<RegisteredMsg>(&m)) {
      auto it = registrations_.find(r->request_id);
      if (it != registrations_.end()) it->second = std::move(*r);
    } else if (auto* r = std::get_if<StoreReplyMsg>(&m)) {
      auto it = stores_.find(r->request_id);
      if (it != stores_.end()) it->second = std::move(*r);
    } else if (auto* d = std::get_if<StepDoneMsg>(&m)) {
      auto it = steps_.find(d->step_id);
      if (it != steps_.end()) it->second = std::move(*d);
      auto w = watchers_.find(d->step_id);
      if (w != watchers_.end()) {
        watcher = std::move(w->second);
        watchers_.erase(w);
      }
    }
    cv_.notify_all();
  }
  if (watcher) watcher();
}

void DaemonClient::on_closed(const Status& why) {
  std::map<uint64_t, std::function<void()>> watchers;
  std::function<void(const Status&)> on_close;
  {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = why.ok() ? Status(Code::unavailable, "closed") : Status(Code::unavailable, why.message());
    close_cause_ = why;
    watchers.swap(watchers_);
    on_close.swap(on_close_);
    cv_.notify_all();
  }
  for (auto& [id, fn] : watchers) fn();
  if (on_close) on_close(why);
}

void DaemonClient::set_close_handler(std::function<void(const Status&)> h) {
  Status why;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!closed_) {
      on_close_ = std::move(h);
      return;
    }
    why = *closed_;
  }
  if (h) h(why);
}

void DaemonClient::notify_when_done(uint64_t id, std::function<void()> fn) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = steps_.find(id);
    bool settled = it == steps_.end() || it->second.has_value() || closed_.has_value();
    if (!settled) {
      watchers_[id] = std::move(fn);
      want_io();
      return;
    }
  }
  fn();
}

bool DaemonClient::alive() const {
  std::lock_guard<std::mutex> lock(mu_);
  return ready_ && !closed_.has_value();
}

Status DaemonClient::post(Message m) { return conn_->send_checked(m); }

Status DaemonClient::request_shutdown(const std::string& reason, Clock::time_point deadline) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    io_forced_ = true;
    want_io();
  }
  conn_->send(ShutdownMsg{reason});
  std::unique_lock<std::mutex> lock(mu_);
  if (!cv_.wait_until(lock, deadline, [&] { return closed_.has_value(); }))
    return deadline_exceeded(who() + " did not close its connection after a Shutdown request");
  return Status::OK();
}

Result<StoreReplyMsg> DaemonClient::store(StoreRequestMsg m, Clock::time_point deadline) {
  uint64_t id;
  {
    std::lock_guard<std::mutex> lock(mu_);
    id = next_request_++;
    stores_[id];
    want_io();
  }
  m.request_id = id;
  if (Status sent = conn_->send_checked(m); !sent.ok()) {
    std::lock_guard<std::mutex> lock(mu_);
    stores_.erase(id);
    return sent;
  }
  std::unique_lock<std::mutex> lock(mu_);
  Status s = wait(lock, deadline, [&] { return stores_[id].has_value(); }, "a rendezvous store request");
  auto reply = std::move(stores_[id]);
  stores_.erase(id);
  if (!s.ok()) return s;
  return std::move(*reply);
}

Result<uint64_t> DaemonClient::register_message(RegisterGraphMsg m, Clock::time_point deadline) {
  uint64_t id;
  {
    std::lock_guard<std::mutex> lock(mu_);
    id = next_request_++;
    registrations_[id];
    want_io();
  }
  m.request_id = id;
  if (Status sent = conn_->send_checked(m); !sent.ok()) {
    std::lock_guard<std::mutex> lock(mu_);
    registrations_.erase(id);
    return sent;
  }
  std::unique_lock<std::mutex> lock(mu_);
  Status s = wait(lock, deadline, [&] { return registrations_[id].has_value(); }, "registering the graph");
  auto reply = std::move(registrations_[id]);
  registrations_.erase(id);
  if (!s.ok()) return s;
  if (!reply->status.ok()) return reply->status;
  return reply->handle;
}

Result<StepDoneMsg> DaemonClient::run_step(RunStepMsg m, Clock::time_point deadline) {
  uint64_t id = m.step_id;
  {
    std::unique_lock<std::mutex> lock(mu_);
    bool idle = ready_ && !closed_ && !caller_driving_ && !io_wanted() &&
                std::this_thread::get_id() != io_thread_.get_id();
    if (idle) {
      steps_[id];
      caller_driving_ = true;
      if (io_running_) {
        // Take the loop from the io thread (it was idle, or it would be wanted).
        io_.stop();
        if (!io_cv_.wait_until(lock, deadline, [&] { return !io_running_; })) {
          caller_driving_ = false;
          steps_.erase(id);
          if (io_wanted()) io_cv_.notify_all();
          return deadline_exceeded("step " + std::to_string(id) + " on " + who() + ": no answer before the deadline");
        }
      }
      lock.unlock();
      return drive_step(std::move(m), deadline);
    }
  }
  AF_RETURN_IF_ERROR(start_step(std::move(m), deadline));
  return wait_step(id, deadline);
}

Result<StepDoneMsg> DaemonClient::drive_step(RunStepMsg m, Clock::time_point deadline) {
  uint64_t id = m.step_id;
  if (deadline != kNoDeadline) m.timeout_ms = timeout_ms_until(deadline);
  driving_ = true;
  io_.restart();
  // Handlers posted before this thread took the loop (a close_graph) run first, in order.
  if (posted_.exchange(0) > 0) io_.poll();
  // Written from this thread now, as a blocking client would (or queued behind a write
  // still in progress, which the loop below then finishes).
  Status sent = conn_->send_owned(m);
  auto answered = [&] {
    std::lock_guard<std::mutex> lock(mu_);
    return steps_[id].has_value() || closed_.has_value();
  };
  // Timers (heartbeats, the silent-peer check) are the loop's: run them this often.
  const auto slice = std::chrono::milliseconds(std::max(1, conn_->heartbeat_ms() / 4));
  bool just_sent = true;
  while (sent.ok() && !answered()) {
    auto now = Clock::now();
    if (deadline != kNoDeadline && now >= deadline) break;
    if (conn_->writes_idle() && conn_->can_read_owned()) {
      // The echo's way: wait on the socket itself and read the answer on this thread;
      // every frame goes to the usual handlers.
      auto until = std::min(deadline, now + slice);
      auto w = conn_->read_owned(until, kick_fd_, just_sent);
      just_sent = false;
      if (!w.ok()) break;  // closed: on_closed has run
      if (*w == Connection::Wait::timeout || (*w == Connection::Wait::kicked && posted_.exchange(0) > 0))
        io_.poll();  // timers, frames posted by other threads
      continue;
    }
    // TLS, a write still going, a payload read into a tensor: let asio drive.
    size_t n = deadline == kNoDeadline ? io_.run_one_for(slice) : io_.run_one_until(std::min(deadline, now + slice));
    if (n == 0 && io_.stopped()) break;
  }
  driving_ = false;
  std::unique_lock<std::mutex> lock(mu_);
  caller_driving_ = false;
  last_caller_ = Clock::now();
  auto reply = std::move(steps_[id]);
  steps_.erase(id);
  watchers_.erase(id);
  // Calls that came meanwhile (their answers, or their frames, are still to come) go to
  // the io thread now.
  if (io_wanted()) io_cv_.notify_all();
  if (!sent.ok()) return sent;
  if (reply) return std::move(*reply);
  if (closed_)
    return Status(closed_->code() == Code::ok ? Code::unavailable : closed_->code(),
                  "step " + std::to_string(id) + " on " + who() + " failed: the connection closed (" +
                      closed_->message() + ")");
  return deadline_exceeded("step " + std::to_string(id) + " on " + who() + ": no answer before the deadline");
}

Status DaemonClient::start_step(RunStepMsg m, Clock::time_point deadline) {
  uint64_t id = m.step_id;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) return Status(Code::unavailable, "running a step on " + who() + ": the connection is closed (" + closed_->message() + ")");
    if (steps_.count(id)) return internal_error("step id " + std::to_string(id) + " is already running");
    steps_[id];
    want_io();
  }
  if (deadline != kNoDeadline) m.timeout_ms = timeout_ms_until(deadline);
  if (Status sent = conn_->send_checked(m); !sent.ok()) {
    std::lock_guard<std::mutex> lock(mu_);
    steps_.erase(id);
    return sent;
  }
  return Status::OK();
}

Result<StepDoneMsg> DaemonClient::wait_step(uint64_t id, Clock::time_point deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!steps_.count(id)) return internal_error("step id " + std::to_string(id) + " was not started");
  Status s = wait(lock, deadline, [&] { return steps_[id].has_value(); }, "step " + std::to_string(id));
  auto reply = std::move(steps_[id]);
  steps_.erase(id);
  watchers_.erase(id);
  if (!s.ok()) return s;
  return std::move(*reply);
}

void DaemonClient::cleanup_step(uint64_t handle, uint64_t step, const Status& why) {
  if (alive()) conn_->send(CleanupStepMsg{handle, step, why});
}

void DaemonClient::close_graph(uint64_t handle) {
  if (alive()) conn_->send(CloseGraphMsg{handle});
}

}  // namespace actorflow::net
