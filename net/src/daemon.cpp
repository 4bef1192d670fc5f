// The node daemon (daemon.h): one io thread accepts and runs every connection; steps and
// registrations run on the WorkerPool, so a long step never stalls heartbeats or other
// clients. Steps of cheap kernels only (microseconds, no wait on any other thread) run on
// the io thread itself and answer from there, with no hop to a worker and back. Each connection's graphs belong to it and are freed when it closes.
#include "actorflow/net/daemon.h"
#include "actorflow/log_time.h"
#include "actorflow/library_threads.h"

#include <asio.hpp>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <condition_variable>
#include <future>
#include <iostream>
#include <map>
#include <mutex>
#include <thread>
#include <utility>

#include <signal.h>
#include <unistd.h>

#include "connection.h"
#include "connection_client.h"
#include "local_daemons.h"
#include "log_escape.h"
#include "partition_service.h"
#include "peer_table.h"
#include "spin_wait.h"
#include "store_service.h"
#include "token.h"
#include "worker_pool.h"

namespace actorflow::net {
namespace {

constexpr size_t kMaxLogLineBytes = 16384;
// Steps in flight beyond this many wait in a queue for their answer (a safety bound:
// a cluster's workers keep one or two steps each in flight).
constexpr int kMaxStepWaiters = 4096;
// When accepting fails for want of descriptors or memory, the pending connection stays
// queued and the next accept fails at once: wait this long before trying again, and say
// so at most once per interval.
constexpr auto kAcceptBackoff = std::chrono::milliseconds(50);
constexpr auto kAcceptLogInterval = std::chrono::seconds(5);

bool is_loopback(const std::string& host) {
  if (host == "localhost") return true;
  std::error_code ec;
  auto a = asio::ip::make_address(host, ec);
  return !ec && a.is_loopback();
}

std::string endpoint_text(const asio::ip::tcp::endpoint& ep) {
  std::string a = ep.address().to_string();
  if (ep.address().is_v6()) a = "[" + a + "]";
  return a + ":" + std::to_string(ep.port());
}

}  // namespace

struct NodeDaemon::Impl {
  DaemonOptions opts;
  uint64_t incarnation = random_incarnation();
  std::string address;
  uint16_t port = 0;
  asio::io_context io;
  asio::executor_work_guard<asio::io_context::executor_type> work{io.get_executor()};
  asio::ip::tcp::acceptor acceptor{io};
  asio::steady_timer accept_backoff{io};
  std::chrono::steady_clock::time_point accept_logged{};
  uint64_t accept_failures = 0;  // since the last line about them
  std::thread io_thread;
  std::unique_ptr<WorkerPool> pool;
  // Threads that wait for partition steps to end and answer them: one per step in flight.
  // A step's kernels run on its executor's threads, not these; with a fixed number of
  // waiters, a ps serving more workers than it had threads queued the chief's answer (and
  // new registrations) behind workers' steps that waited for the chief's next step.
  std::unique_ptr<WorkerPool> waiters;
  // Graphs cut over several daemons: the connections to the other daemons, and the
  // partitions registered here.
  std::unique_ptr<PeerTable> peers;
  std::shared_ptr<asio::ssl::context> tls_server;  // null: plain TCP
  std::unique_ptr<PartitionService> partitions;
  // Collective groups' rendezvous keys (store_service.h).
  StoreService store;
  // The same partitions, for sessions of this process (local_daemons.h).
  std::shared_ptr<LocalDaemon> local;
  // io thread only.
  std::map<uint64_t, std::shared_ptr<Connection>> conns;
  uint64_t next_conn = 1;
  // A step was answered from the io thread: its client likely sends the next one within
  // microseconds, so the thread polls for it before sleeping (spin_wait.h). Steps that
  // wait for edges or workers (training) do not arm it: their daemons' cores are busy.
  bool answered_inline = false;
  std::atomic<bool> stopping{false};
  std::atomic<int64_t> steps_run{0};
  std::mutex stop_mu;
  std::condition_variable stop_cv;
  bool stopped = false;
  bool stop_started = false;
  // Runs the stop a client's Shutdown asked for (stop() may not run on the io thread).
  std::thread stopper;

  void stop_once();

  // Every line is escaped here, at the one place all of the daemon's lines pass: role and
  // task names, locations and node names in errors all come from peers.
  void log(const std::string& line) { opts.log(escape_for_log(line, kMaxLogLineBytes)); }
  void accept();
  void on_accepted(asio::ip::tcp::socket socket);
  void on_message(uint64_t id, const std::shared_ptr<Connection>& c, Message&& m);
  void shutdown();
};

void NodeDaemon::Impl::accept() {
  acceptor.async_accept([this](std::error_code ec, asio::ip::tcp::socket socket) {
    if (stopping || !acceptor.is_open()) return;
    if (!ec) {
      on_accepted(std::move(socket));
      return accept();
    }
    ++accept_failures;
    auto now = std::chrono::steady_clock::now();
    if (now - accept_logged >= kAcceptLogInterval) {
      log("accept failed: " + ec.message() + " (" + std::to_string(accept_failures) +
          " time(s) since the last such line; retrying every " + std::to_string(kAcceptBackoff.count()) + " ms)");
      accept_logged = now;
      accept_failures = 0;
    }
    accept_backoff.expires_after(kAcceptBackoff);
    accept_backoff.async_wait([this](std::error_code wait_ec) {
      if (!wait_ec && !stopping && acceptor.is_open()) accept();
    });
  });
}

void NodeDaemon::Impl::on_accepted(asio::ip::tcp::socket socket) {
  std::error_code ec;
  auto remote = socket.remote_endpoint(ec);
  std::string label = ec ? std::string("an unknown peer") : endpoint_text(remote);
  auto nonce = random_nonce();
  if (!nonce.ok()) {
    log("connection from " + label + " refused: " + nonce.status().to_string());
    return;
  }
  Handshake hs(Handshake::Side::daemon, Identity{"daemon", opts.task, incarnation}, opts.token, *nonce,
               opts.max_message_bytes);
  ConnectionOptions co;
  co.tls = tls_server;
  co.tls_server = true;
  co.max_message_bytes = opts.max_message_bytes;
  co.heartbeat_ms = opts.heartbeat_ms;
  co.idle_timeout_ms = opts.idle_timeout_ms;
  uint64_t id = next_conn++;
  auto c = Connection::create(std::move(socket), std::move(hs), co, label);
  conns[id] = c;
  std::weak_ptr<Connection> weak = c;
  auto authenticated = std::make_shared<bool>(false);
  auto peer_address = std::make_shared<std::string>();  // set when a peer daemon dialed
  c->start(Connection::Handlers{
      [this, label, authenticated, peer_address, weak](const Identity& peer) {
        *authenticated = true;
        // A peer daemon's role and address are inside the handshake's MACs (peer_table.h).
        if (peer.role == "daemon") {
          *peer_address = peer.task;
          if (auto c = weak.lock()) peers->accepted(*peer_address, c);
          log("connection from " + label + " (peer daemon '" + peer.task + "') authenticated");
        } else {
          log("connection from " + label + " (client '" + peer.task + "') authenticated");
        }
      },
      [this, id, weak, peer_address](Message&& m) {
        auto c = weak.lock();
        if (!c) return;
        if (std::holds_alternative<EdgeFrameMsg>(m) || std::holds_alternative<CreditMsg>(m)) {
          // Never blocks: it hands the bytes to a rendezvous.
          if (Status s = partitions->deliver(m, EdgeSource{id, *peer_address}); !s.ok()) c->close(s);
          return;
        }
        on_message(id, c, std::move(m));
      },
      [this, id, label, authenticated, peer_address](const Status& why) {
        conns.erase(id);
        if (!*authenticated) {
          log("connection from " + label + " closed before authentication: " + why.to_string());
          return;
        }
        log("connection from " + label + " closed: " + why.to_string());
        // A peer daemon's connection (it dialed this one): lost as a dialed one would be.
        if (!peer_address->empty()) peers->accepted_closed(*peer_address, why);
        // Its partitions' steps in flight end now, from here: each may hold a worker
        // thread, and with all of them held the freeing below would never run.
        partitions->abort_owner(id);
        // Freeing sessions stops actors: not on the io thread.
        pool->post([this, id, label] {
          size_t n = partitions->close_owner(id);
          if (n > 0) log("freed " + std::to_string(n) + " graph(s) of the connection from " + label);
        });
      }});
}

void NodeDaemon::Impl::on_message(uint64_t id, const std::shared_ptr<Connection>& c, Message&& m) {
  if (auto* sd = std::get_if<ShutdownMsg>(&m)) {
    log("shutdown requested by " + c->label() + (sd->reason.empty() ? std::string() : ": " + sd->reason));
    std::lock_guard<std::mutex> lock(stop_mu);
    if (!stop_started && !stopper.joinable()) stopper = std::thread([this] { stop_once(); });
    return;
  }
  if (auto* sr = std::get_if<StoreRequestMsg>(&m)) {
    // A map lookup or insert under a lock: answered from the io thread.
    c->send(store.handle(*sr));
    return;
  }
  if (auto* a = std::get_if<CleanupStepMsg>(&m)) {
    partitions->abort_step(a->handle, a->step_id, a->status, id);
    return;
  }
  if (auto* r = std::get_if<RegisterGraphMsg>(&m)) {
    if (r->location.empty()) {
      // A whole graph with no location is what clients before protocol 5 sent; the
      // handshake turns those away, so this is a malformed frame.
      c->send(RegisteredMsg{r->request_id, 0,
                            invalid_argument("RegisterGraph names no location: a daemon runs partitions only, "
                                             "each registered for its location")});
      return;
    }
    pool->post([this, id, c, r = std::move(*r)] {
      RegisteredMsg reply{r.request_id, 0, Status::OK()};
      auto h = partitions->register_partition(r, id, std::chrono::steady_clock::now() + std::chrono::seconds(10));
      if (h.ok()) reply.handle = *h;
      else reply.status = h.status();
      log("partition " + r.location + " for " + c->label() +
          (h.ok() ? " registered as " + std::to_string(*h) : ": " + h.status().to_string()));
      c->send(std::move(reply));
    });
  } else if (auto* s = std::get_if<RunStepMsg>(&m)) {
    // Started here, in the order this connection delivered the steps; waited for on a
    // worker thread, which sleeps rather than polls (the executor's wait for partitions):
    // a polling waiter per step took the cores the steps need.
    auto started = partitions->start_step(*s, id);
    auto finish = [this, c, started, step = s->step_id] {
      StepDoneMsg done = partitions->finish_step(*started);
      ++steps_run;
      if (!done.status.ok()) log("partition step " + std::to_string(step) + " for " + c->label() + " failed: " + done.status.to_string());
      if (Status sent = c->send_checked(done); !sent.ok())
        c->send(StepDoneMsg{step, sent.with_context("the fetched tensors of step " + std::to_string(step)), {}});
    };
    // A partition of cheap kernels only, with no edge to wait for, has already run to its
    // end above, on this thread: answer from here, without a hop to a worker, and poll
    // for the client's next step, which likely comes within microseconds.
    if (PartitionService::ended(*started)) {
      answered_inline = true;
      finish();
    } else {
      waiters->post(std::move(finish));
    }
  } else if (auto* cg = std::get_if<CloseGraphMsg>(&m)) {
    uint64_t handle = cg->handle;
    // As when a connection closes: its steps end from here, the freeing waits for a worker.
    partitions->abort_graph(handle, id, PartitionService::closed_by_client());
    pool->post([this, id, handle] { partitions->close_graph(handle, id); });
  } else {
    c->close(data_loss(std::string("a client may not send ") + message_name(m)));
  }
}

void NodeDaemon::Impl::shutdown() {
  auto t0 = std::chrono::steady_clock::now();
  withdraw_local_daemon(local.get());
  asio::post(io, [this] {
    std::error_code ec;
    acceptor.close(ec);
    accept_backoff.cancel();
  });
  int in_flight = pool->busy() + waiters->busy();
  bool drained = pool->drain(t0 + std::chrono::milliseconds(opts.drain_timeout_ms)) &&
                 waiters->drain(t0 + std::chrono::milliseconds(opts.drain_timeout_ms));
  // As the connections close below: this process's sessions start no more steps here.
  local->shut();
  // Each drained step's StepDone is queued on its connection; close after writing it.
  std::promise<size_t> closed;
  auto closed_f = closed.get_future();
  asio::post(io, [this, &closed] {
    closed.set_value(conns.size());
    for (auto& [id, c] : conns) c->close_after_writes(cancelled("the daemon " + opts.task + " is shutting down"), 2000);
  });
  size_t n = closed_f.wait_for(std::chrono::seconds(5)) == std::future_status::ready ? closed_f.get() : 0;
  // Give the connections their grace to flush, then stop the loop.
  auto flush_deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(2500);
  while (std::chrono::steady_clock::now() < flush_deadline) {
    std::promise<bool> empty;
    auto f = empty.get_future();
    asio::post(io, [this, &empty] { empty.set_value(conns.empty()); });
    if (f.wait_for(std::chrono::seconds(1)) != std::future_status::ready || f.get()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  work.reset();
  io.stop();
  if (io_thread.joinable()) io_thread.join();
  pool->stop();
  waiters->stop();
  conns.clear();
  log("shutdown: " + std::to_string(n) + " connection(s) closed, " + std::to_string(in_flight) +
      " step(s) or graph release(s) in flight " + (drained ? "drained" : "NOT drained within the drain timeout") + ", " +
      std::to_string(steps_run.load()) + " step(s) run in all");
  // No Edge or Credit frame may reach the partitions while they are freed: the io thread
  // is stopped, and the dialed peers' threads end here.
  peers->close_all();
  partitions.reset();
  peers.reset();
}

NodeDaemon::NodeDaemon(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

NodeDaemon::~NodeDaemon() {
  stop();
  join();
  std::thread stopper;
  {
    std::lock_guard<std::mutex> lock(impl_->stop_mu);
    stopper.swap(impl_->stopper);
  }
  if (stopper.joinable()) stopper.join();
}

Result<std::unique_ptr<NodeDaemon>> NodeDaemon::start(DaemonOptions options) {
  auto impl = std::make_unique<Impl>();
  if (!options.log) {
    auto mu = std::make_shared<std::mutex>();
    options.log = [mu, task = options.task](const std::string& line) {
      std::lock_guard<std::mutex> lock(*mu);
      // One write per line: a program sharing the descriptor (a training task printing
      // its RESULT line) must not find its own lines cut in two.
      std::string whole = log_time() + " [actorflow-node " + task + "] " + line + "\n";
      std::fwrite(whole.data(), 1, whole.size(), stderr);
      std::fflush(stderr);
    };
  }
  if (options.token.empty()) {
    auto token = load_token(options.token_file);
    if (token.ok()) options.token = *token;
    else if (!options.insecure || token.status().code() != Code::not_found) return token.status();
  } else {
    AF_RETURN_IF_ERROR(check_token(options.token, "the daemon's token"));
  }
  if (options.insecure && !options.host.empty() && !is_loopback(options.host))
    return invalid_argument("--insecure listens on loopback only, not on '" + options.host +
                            "': use --host 127.0.0.1, or set a cluster token (ACTORFLOW_TOKEN) instead");
  if (options.worker_threads < 1) return invalid_argument("worker_threads must be at least 1");
  if (options.heartbeat_ms < 1) return invalid_argument("heartbeat_ms must be at least 1");
  // Peers beat every heartbeat_ms when idle (the cluster's processes share the flag): a
  // shorter timeout would drop live peers.
  if (options.idle_timeout_ms < 2 * options.heartbeat_ms)
    return invalid_argument("--peer_timeout_ms (--idle_timeout_ms) must be at least " +
                            std::to_string(2 * options.heartbeat_ms) + " (twice --heartbeat_ms)");
  if (options.max_message_bytes < kMaxPreAuthFrameBytes)
    return invalid_argument("--max_message_bytes must be at least " + std::to_string(kMaxPreAuthFrameBytes));
  impl->opts = std::move(options);
  auto& opts = impl->opts;
  TlsFiles files{opts.tls_cert, opts.tls_key, opts.tls_ca};
  if (files.empty()) files = tls_files_from_env();
  std::string where_flags = opts.tls_cert.empty() && opts.tls_key.empty() && opts.tls_ca.empty()
                                ? "ACTORFLOW_TLS_CERT/KEY/CA" : "--tls_cert/--tls_key/--tls_ca";
  AF_ASSIGN_OR_RETURN(impl->tls_server, make_tls_context(files, true, where_flags));
  ConnectionOptions dial;
  // Dials to peer daemons beat and time out like this daemon's own connections.
  dial.heartbeat_ms = opts.heartbeat_ms;
  dial.idle_timeout_ms = opts.idle_timeout_ms;
  AF_ASSIGN_OR_RETURN(dial.tls, make_tls_context(files, false, where_flags));
  if (opts.host.empty())
    opts.host = !opts.insecure && (impl->tls_server || opts.trusted_network) ? "0.0.0.0" : "127.0.0.1";
  if (!impl->tls_server && !opts.trusted_network && !is_loopback(opts.host))
    return invalid_argument(
        "refusing to listen on '" + opts.host + "' without TLS: beyond loopback anyone on the network path could "
        "inject frames into an authenticated connection. Give the daemon a certificate (--tls_cert/--tls_key/--tls_ca "
        "or ACTORFLOW_TLS_CERT/KEY/CA), or pass --trusted_network if no one else can reach this network, or listen "
        "on 127.0.0.1");
  std::error_code ec;
  asio::ip::tcp::resolver resolver(impl->io);
  auto endpoints = resolver.resolve(opts.host, std::to_string(opts.port), asio::ip::resolver_base::passive, ec);
  if (ec || endpoints.empty())
    return invalid_argument("cannot resolve the listening address '" + opts.host + "': " + ec.message());
  auto ep = endpoints.begin()->endpoint();
  impl->acceptor.open(ep.protocol(), ec);
  if (!ec) impl->acceptor.set_option(asio::ip::tcp::acceptor::reuse_address(true), ec);
  if (!ec) impl->acceptor.bind(ep, ec);
  if (!ec) impl->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec)
    return Status(Code::unavailable, "cannot listen on " + opts.host + ":" + std::to_string(opts.port) + ": " + ec.message());
  auto bound = impl->acceptor.local_endpoint(ec);
  impl->port = bound.port();
  impl->address = endpoint_text(bound);
  std::string where = opts.task + " at " + impl->address;
  Impl* self = impl.get();
  impl->peers = std::make_unique<PeerTable>(impl->address, opts.token, [self](const std::string& address, Message&& m) {
    if (!self->partitions) return;
    if (Status s = self->partitions->deliver(m, EdgeSource{0, address}); !s.ok())
      self->log("peer daemon at " + address + ": " + s.to_string());
  });
  impl->peers->set_log([self](const std::string& line) { self->log(line); });
  // A lost peer, dialed or accepted: the steps exchanging edges with it end now.
  impl->peers->set_on_lost([self](const std::string& address, const Status& why) {
    if (self->partitions) self->partitions->peer_lost(address, why);
  });
  impl->peers->set_connection_options(dial);
  impl->partitions = std::make_unique<PartitionService>(where, *impl->peers);
  impl->pool = std::make_unique<WorkerPool>(opts.worker_threads);
  impl->waiters = std::make_unique<WorkerPool>(1, kMaxStepWaiters);
  impl->accept();
  Impl* raw = impl.get();
  impl->local = std::make_shared<LocalDaemon>(where, *impl->partitions, *impl->waiters, impl->steps_run,
                                              [raw](const std::string& line) { raw->log(line); });
  publish_local_daemon(opts.host, impl->port, impl->local);
  auto spin = opts.spin_us < 0 ? default_spin_budget() : std::chrono::microseconds(opts.spin_us);
  impl->io_thread = std::thread([raw, spin] {
    enter_library_thread("af-daemon-io");
    run_io_spinning(raw->io, spin, [raw] { return std::exchange(raw->answered_inline, false); });
  });
  raw->log("listening on " + raw->address + (opts.token.empty() ? " (insecure: no cluster token)" : "") +
           (raw->tls_server ? " with TLS" : "") +
           ", incarnation " + std::to_string(raw->incarnation));
  return std::unique_ptr<NodeDaemon>(new NodeDaemon(std::move(impl)));
}

uint16_t NodeDaemon::port() const { return impl_->port; }
std::string NodeDaemon::address() const { return impl_->address; }
const std::string& NodeDaemon::task() const { return impl_->opts.task; }
uint64_t NodeDaemon::incarnation() const { return impl_->incarnation; }
size_t NodeDaemon::num_graphs() const { return impl_->partitions ? impl_->partitions->size() : 0; }

void NodeDaemon::Impl::stop_once() {
  {
    std::lock_guard<std::mutex> lock(stop_mu);
    if (stop_started) return;
    stop_started = true;
  }
  stopping = true;
  shutdown();
  {
    std::lock_guard<std::mutex> lock(stop_mu);
    stopped = true;
  }
  stop_cv.notify_all();
}

void NodeDaemon::stop() { impl_->stop_once(); }

void NodeDaemon::join() {
  std::unique_lock<std::mutex> lock(impl_->stop_mu);
  impl_->stop_cv.wait(lock, [this] { return impl_->stopped; });
}

Status request_shutdown(const std::string& host, uint16_t port, const std::string& reason, int timeout_ms) {
  auto deadline = DaemonClient::Clock::now() + std::chrono::milliseconds(timeout_ms);
  auto token = load_token();
  if (!token.ok() && token.status().code() != Code::not_found) return token.status();
  std::string label = "af://" + host + ":" + std::to_string(port);
  AF_ASSIGN_OR_RETURN(auto client, DaemonClient::connect(host, port, token.ok() ? *token : std::string(), label, deadline));
  return client->request_shutdown(reason, deadline);
}

namespace {
sigset_t stop_signal_set() {
  sigset_t s;
  sigemptyset(&s);
  sigaddset(&s, SIGTERM);
  sigaddset(&s, SIGINT);
  // Raised by wait_until_stopped's watcher when a Shutdown request stopped the daemon.
  sigaddset(&s, SIGUSR1);
  return s;
}
}  // namespace

void block_stop_signals() {
  sigset_t s = stop_signal_set();
  pthread_sigmask(SIG_BLOCK, &s, nullptr);
  std::signal(SIGPIPE, SIG_IGN);
}

int wait_until_stopped(NodeDaemon& daemon) {
  std::thread watcher([&daemon] {
    daemon.join();
    kill(getpid(), SIGUSR1);
  });
  sigset_t s = stop_signal_set();
  int sig = 0;
  sigwait(&s, &sig);
  daemon.stop();
  watcher.join();
  return sig == SIGUSR1 ? 0 : sig;
}

}  // namespace actorflow::net
