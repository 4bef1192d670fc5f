// Connections between daemons; see peer_table.h.
#include "peer_table.h"

#include <utility>

namespace actorflow::net {

PeerTable::PeerTable(std::string self_address, std::string token, OnMessage on_message)
    : self_(std::move(self_address)), token_(std::move(token)), on_message_(std::move(on_message)) {}

PeerTable::~PeerTable() { close_all(); }

void PeerTable::close_all() {
  std::map<std::string, std::shared_ptr<DaemonClient>> dialed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    dialed.swap(dialed_);
    accepted_.clear();
  }
  // Joined here, while this holds them: a frame's handler on a client's own io thread may
  // hold the client too (PeerTable::send), and must not be the one that drops it last.
  for (auto& [address, client] : dialed) client->stop();
  dialed.clear();
}

Status PeerTable::connect_if_lower(const std::string& address, DaemonClient::Clock::time_point deadline,
                                   const std::string& location) {
  if (address == self_ || !(self_ < address)) return Status::OK();
  // One dial at a time: two registrations racing to dial one peer would leave the peer
  // holding the connection this side dropped, and its edges would go nowhere.
  std::lock_guard<std::mutex> dialing(dial_mu_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = dialed_.find(address);
    if (it != dialed_.end() && it->second->alive()) return Status::OK();
  }
  size_t colon = address.rfind(':');
  if (colon == std::string::npos) return invalid_argument("peer address '" + address + "' has no port");
  std::string host = address.substr(0, colon);
  if (host.size() > 2 && host.front() == '[') host = host.substr(1, host.size() - 2);
  int port = std::atoi(address.c_str() + colon + 1);
  if (port < 1 || port > 65535) return invalid_argument("peer address '" + address + "' has a bad port");
  auto c = DaemonClient::connect(host, static_cast<uint16_t>(port), token_, "af://" + address, deadline, dial_options_,
                                 self_);
  if (!c.ok())
    return c.status().with_context("connecting to the peer daemon " + (location.empty() ? "" : "of " + location + " ") +
                                   "at " + address);
  std::shared_ptr<DaemonClient> client(std::move(c).value());
  client->set_message_handler([f = on_message_, address](Message&& m) { f(address, std::move(m)); });
  bool again;
  {
    std::lock_guard<std::mutex> lock(mu_);
    again = dialed_.count(address) > 0;
  }
  if (log_) log_("peer daemon " + client->daemon().task + " at " + address + (again ? " is back: connected again" : ": connected"));
  // A lost peer (its process died, or it fell silent past the peer timeout) says so once,
  // and the steps that exchange edges with it end; closing the table (cancelled) is no loss.
  client->set_close_handler([log = log_, lost = on_lost_, address, task = client->daemon().task](const Status& why) {
    if (why.code() == Code::cancelled) return;
    if (log) log("peer daemon " + task + " at " + address + " lost: " + why.to_string());
    if (lost) lost(address, Status(Code::unavailable, "peer daemon " + task + " at " + address + " lost: " + why.message()));
  });
  std::shared_ptr<DaemonClient> old;
  {
    std::lock_guard<std::mutex> lock(mu_);
    old = std::exchange(dialed_[address], std::move(client));
  }
  // The lost connection joins its io thread here, outside mu_ (a frame it still delivers
  // may send on this table), while this holds it (see close_all).
  if (old) old->stop();
  old.reset();
  return Status::OK();
}

void PeerTable::accepted(const std::string& address, const std::shared_ptr<Connection>& c) {
  std::lock_guard<std::mutex> lock(mu_);
  accepted_[address] = c;
}

void PeerTable::accepted_closed(const std::string& address, const Status& why) {
  if (why.code() == Code::cancelled || !on_lost_) return;
  on_lost_(address, Status(Code::unavailable, "the connection from peer daemon " + address + " closed: " + why.message()));
}

Status PeerTable::send(const std::string& address, Message m) {
  std::shared_ptr<DaemonClient> dialed;
  std::shared_ptr<Connection> conn;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto d = dialed_.find(address);
    if (d != dialed_.end() && d->second->alive()) dialed = d->second;
    auto a = accepted_.find(address);
    if (!dialed && a != accepted_.end()) conn = a->second.lock();
  }
  // An edge over the peer's --max_message_bytes fails its _Send (and so the step, with
  // the reason) instead of vanishing.
  if (dialed) return dialed->post(std::move(m));
  if (conn) return conn->send_checked(m);
  return Status(Code::unavailable, "no connection from " + self_ + " to the peer daemon at " + address);
}

}  // namespace actorflow::net
