// The node daemon (`actorflow-node`), as a library: it listens, authenticates every
// connection with the cluster token, and runs the graphs clients register in local
// sessions. A client is `Session::create(g, "af://host:port")`.
//
//   auto d = af::net::NodeDaemon::start({.host = "127.0.0.1", .port = 0, .token = "s3cret"});
//   if (!d.ok()) ...;           // e.g. no token and not insecure
//   std::cout << (*d)->port();  // the port the OS chose
//   (*d)->stop();               // drains steps in flight, closes connections
#pragma once
#include "actorflow/api.h"
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "actorflow/status.h"

AF_PUBLIC_BEGIN

namespace actorflow::net {

struct DaemonOptions {
  // Empty: every interface (0.0.0.0) with TLS or trusted_network, else 127.0.0.1.
  std::string host = "127.0.0.1";
  uint16_t port = 0;  // 0: the OS picks one; see port()
  // Names this daemon in log lines and errors.
  std::string task = "/job:worker/task:0";
  // The cluster token. Empty: read --token_file (token_file), then ACTORFLOW_TOKEN, then
  // ACTORFLOW_TOKEN_FILE; with none, start() fails saying how to set one.
  std::string token;
  std::string token_file;
  // No token needed: listens on loopback only (for tests on one machine).
  bool insecure = false;
  // Without TLS only the handshake is authenticated: later frames carry a CRC, not a MAC,
  // so anyone on the network path could inject frames into a connection. Such a daemon
  // therefore listens on loopback only, unless this says the network is trusted
  // (--trusted_network: a private network that no one else can reach).
  bool trusted_network = false;
  // TLS under the token handshake (--tls_cert/--tls_key/--tls_ca; empty: the
  // ACTORFLOW_TLS_CERT/KEY/CA variables; none of them: plain TCP). Every peer must present
  // a certificate signed by the CA, and clients verify the daemon's the same way.
  std::string tls_cert, tls_key, tls_ca;
  // The largest frame accepted after authentication (--max_message_bytes).
  uint64_t max_message_bytes = uint64_t{2} << 30;
  // Threads running whole-graph steps, registrations and releases; those beyond this wait
  // in a queue. A partition step runs on its executor's threads, and each in flight has a
  // thread of its own that waits for its end and answers it.
  int worker_threads = 8;
  // A Heartbeat goes to every idle peer this often; a peer silent for idle_timeout_ms
  // (--peer_timeout_ms; at least twice heartbeat_ms) is dropped and its graphs freed.
  // The connections this daemon dials to its peer daemons use the same two values.
  // Clients beat every second unless set_client_heartbeat() says otherwise: every
  // process of a cluster should be given the same --heartbeat_ms / --peer_timeout_ms.
  int heartbeat_ms = 1000;
  int idle_timeout_ms = 15000;
  // After answering a step from its io thread (a step of cheap kernels), the thread polls
  // for the client's next frame this long before it sleeps (--spin_us): a sleeping thread
  // takes 30-100 us to wake on a VM. It stops sooner when another thread wants its core.
  // -1: AF_NET_SPIN_US, else 50; 0: never polls.
  int spin_us = -1;
  // stop() waits this long for steps in flight before closing connections.
  int drain_timeout_ms = 30000;
  // One line per event; default: stderr with the task as prefix.
  std::function<void(const std::string&)> log;
};

class NodeDaemon {
 public:
  static Result<std::unique_ptr<NodeDaemon>> start(DaemonOptions options);
  ~NodeDaemon();  // stop() and join()
  NodeDaemon(const NodeDaemon&) = delete;
  NodeDaemon& operator=(const NodeDaemon&) = delete;

  uint16_t port() const;
  // "host:port" as bound.
  std::string address() const;
  const std::string& task() const;
  // Random per start: a client that sees it change knows its graphs are gone.
  uint64_t incarnation() const;
  // Stops accepting, lets steps in flight finish (up to drain_timeout_ms), closes every
  // connection. Idempotent; any thread but the daemon's own.
  void stop();
  // Returns once stop() has finished.
  void join();
  // Graphs currently registered (for tests and logs).
  size_t num_graphs() const;

 private:
  struct Impl;
  explicit NodeDaemon(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// This process's client connections to daemons (sessions on af:// targets): a
// Heartbeat every `heartbeat_ms` when idle, and a daemon that sent nothing (no frame, no
// heartbeat) for `peer_timeout_ms` is taken as dead: its connection closes, the steps
// waiting on it fail naming it, and the next step connects and registers afresh.
// Defaults 1000 / 10000. Call at startup, before any session; a value <= 0 keeps the
// current one. actorflow-node and the samples call it with --heartbeat_ms and
// --peer_timeout_ms.
void set_client_heartbeat(int heartbeat_ms, int peer_timeout_ms);

// The tensor bytes this process's daemons sent to and received from other daemons
// (edges of graphs cut over tasks), since the process started.
struct EdgeTraffic {
  uint64_t sent = 0;
  uint64_t received = 0;
};
EdgeTraffic edge_traffic();

// For a program that is mainly a daemon (actorflow-node, a ps task): call
// block_stop_signals() before NodeDaemon::start (its threads inherit the mask), then
// wait_until_stopped(), which returns once SIGTERM or SIGINT arrived (it then stops the
// daemon: drains steps, closes connections) or a client's Shutdown request stopped it.
// Returns the signal, or 0 for a Shutdown request.
void block_stop_signals();
int wait_until_stopped(NodeDaemon& daemon);

// Tells the daemon at host:port that training is over: it drains its steps in flight,
// closes its connections and stops, and a ps process serving it exits 0. Returns once the
// daemon has closed the connection, or fails at the deadline naming the daemon. The
// token is the cluster's (ACTORFLOW_TOKEN, ACTORFLOW_TOKEN_FILE).
Status request_shutdown(const std::string& host, uint16_t port, const std::string& reason, int timeout_ms = 10000);

}  // namespace actorflow::net

AF_PUBLIC_END
