// A daemon's connections to the other daemons of a cluster (TF's WorkerCache): one per
// pair, keyed by the peer's listening address. The daemon with the lower address dials
// (OneFlow's InitSockets), saying role "daemon" and its own address in its Hello (both
// bound by the handshake's MACs), and the other side files the accepted connection under
// that address; both then send Edge and Credit frames over it. Sends never block: frames
// are queued on the connection.
#pragma once
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "connection.h"
#include "connection_client.h"

namespace actorflow::net {

class PeerTable {
 public:
  // `on_message` receives the Edge and Credit frames arriving on dialed connections, with
  // the address dialed (the daemon routes those arriving on accepted ones itself).
  using OnMessage = std::function<void(const std::string& address, Message&&)>;
  PeerTable(std::string self_address, std::string token, OnMessage on_message);
  ~PeerTable();
  // Options of the connections this table dials (TLS, heartbeats); set before use.
  void set_connection_options(ConnectionOptions o) { dial_options_ = std::move(o); }
  // Gets a line when a dialed peer connects, comes back, or is lost. Set before use.
  void set_log(std::function<void(const std::string&)> log) { log_ = std::move(log); }
  // Called (on the connection's io thread; it must not block) when a peer's connection
  // is lost, dialed or accepted, with the peer's address and why. Set before use.
  void set_on_lost(std::function<void(const std::string& address, const Status& why)> f) { on_lost_ = std::move(f); }
  const std::string& self() const { return self_; }

  // Dials `address` when this daemon's address is the lower one and no live connection
  // exists; the higher side waits for the dial. By `deadline`. `location` (the peer's, as
  // /job:ps/task:0/cpu:0) names it in the error.
  Status connect_if_lower(const std::string& address, DaemonClient::Clock::time_point deadline,
                          const std::string& location = "");
  // An accepted connection whose Hello said role "daemon" and task `address`.
  void accepted(const std::string& address, const std::shared_ptr<Connection>& c);
  // That connection closed: unless this daemon closed it (cancelled), the peer is lost,
  // as when a dialed connection is (on_lost). The io thread calls it; it never blocks.
  void accepted_closed(const std::string& address, const Status& why);
  // Closes the dialed connections and waits for their io threads, so no frame arrives
  // after it returns (the daemon's shutdown, before it frees its partitions).
  void close_all();
  // Queues `m` for the daemon at `address`; unavailable when no connection is up.
  Status send(const std::string& address, Message m);

 private:
  std::string self_;
  std::string token_;
  ConnectionOptions dial_options_;
  std::mutex dial_mu_;
  OnMessage on_message_;
  std::function<void(const std::string&)> log_;
  std::function<void(const std::string&, const Status&)> on_lost_;
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<DaemonClient>> dialed_;
  std::map<std::string, std::weak_ptr<Connection>> accepted_;
};

}  // namespace actorflow::net
