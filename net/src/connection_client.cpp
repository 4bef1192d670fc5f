// The client end of a daemon connection (connection_client.h).
#include "connection_client.h"

#include <unistd.h>

#include <atomic>

#include "actorflow/net/daemon.h"

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
                                                            std::string self_task) {
  if (!options.tls) {
    auto tls = client_tls_from_env();
    if (!tls.ok()) return tls.status();
    options.tls = *tls;
  }
  options.tls_server = false;
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
  c->io_thread_ = std::thread([raw = c.get()] { raw->io_.run(); });
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
      c->io_.stop();
      if (c->io_thread_.joinable()) c->io_thread_.join();
      return Status(done ? Code::unavailable : Code::deadline_exceeded,
                    "cannot connect to the node daemon at " + label + ": " + why);
    }
  }
  // Daemons log clients by this name: which process on which host.
  char host_name[256] = {};
  if (::gethostname(host_name, sizeof host_name - 1) != 0) host_name[0] = '\0';
  std::string me = "pid " + std::to_string(::getpid()) + " on " + (host_name[0] ? host_name : "?");
  // A daemon dialing a peer names itself by its own address (peer_table.h).
  if (!self_task.empty()) me = std::move(self_task);
  Handshake hs(Handshake::Side::client, Identity{"client", me, random_incarnation()}, token, *nonce);
  c->conn_ = Connection::create(std::move(socket), std::move(hs), options, label);
  DaemonClient* raw = c.get();
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
    if (s.code() == Code::unavailable)
      s = Status(Code::unavailable, s.message() + " (the daemon refused the handshake: is ACTORFLOW_TOKEN the same here as on the daemon?)");
    return s;
  }
  return c;
}

DaemonClient::~DaemonClient() {
  if (conn_) conn_->close(cancelled("the client closed the connection"));
  work_.reset();
  // Let the close run, then stop the loop whatever is pending.
  asio::post(io_, [this] { io_.stop(); });
  if (io_thread_.joinable()) io_thread_.join();
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
      return;
    }
  }
  fn();
}

bool DaemonClient::alive() const {
  std::lock_guard<std::mutex> lock(mu_);
  return ready_ && !closed_.has_value();
}

Result<uint64_t> DaemonClient::register_graph(std::string graph_def, Clock::time_point deadline, uint64_t extends) {
  RegisterGraphMsg m;
  m.graph_def = std::move(graph_def);
  m.extends_handle = extends;
  return register_message(std::move(m), deadline);
}

Status DaemonClient::post(Message m) { return conn_->send_checked(m); }

Status DaemonClient::request_shutdown(const std::string& reason, Clock::time_point deadline) {
  conn_->send(ShutdownMsg{reason});
  std::unique_lock<std::mutex> lock(mu_);
  if (!cv_.wait_until(lock, deadline, [&] { return closed_.has_value(); }))
    return deadline_exceeded(who() + " did not close its connection after a Shutdown request");
  return Status::OK();
}

Result<uint64_t> DaemonClient::register_message(RegisterGraphMsg m, Clock::time_point deadline) {
  uint64_t id;
  {
    std::lock_guard<std::mutex> lock(mu_);
    id = next_request_++;
    registrations_[id];
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
  AF_RETURN_IF_ERROR(start_step(std::move(m), deadline));
  return wait_step(id, deadline);
}

Status DaemonClient::start_step(RunStepMsg m, Clock::time_point deadline) {
  uint64_t id = m.step_id;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) return Status(Code::unavailable, "running a step on " + who() + ": the connection is closed (" + closed_->message() + ")");
    if (steps_.count(id)) return internal_error("step id " + std::to_string(id) + " is already running");
    steps_[id];
  }
  if (deadline != kNoDeadline) m.timeout_ms = std::max<int64_t>(1, ms_until(deadline));
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
