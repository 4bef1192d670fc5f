// Partitions on a daemon and the RemoteEdges that joins them to the other daemons; see
// partition_service.h.
#include "partition_service.h"

#include "actorflow/net/daemon.h"

#include <atomic>
#include <set>

#include "actorflow/tensor_codec.h"

namespace actorflow::net {
namespace {

// Tensor bytes that crossed to or from another daemon, for the whole process.
std::atomic<uint64_t> g_edge_bytes_sent{0}, g_edge_bytes_received{0};

// The RemoteEdges of one session's partition: frames to the daemon that holds the
// destination location, or straight to the rendezvous when that is this daemon.
class PeerEdges final : public runtime::RemoteEdges {
 public:
  PeerEdges(uint64_t session, std::map<std::string, std::string> addresses, PeerTable& peers, PartitionService& local)
      : session_(session), addresses_(std::move(addresses)), peers_(peers), local_(local) {}

  Status send_edge(const std::string& to, int64_t step, int64_t edge, runtime::EdgeValue value) override {
    AF_ASSIGN_OR_RETURN(std::string address, address_of(to));
    if (address == peers_.self()) {
      local_.deliver_edge(session_, to, step, edge, std::move(value));
      return Status::OK();
    }
    g_edge_bytes_sent.fetch_add(value.tensor.valid() ? value.tensor.bytes() : 0, std::memory_order_relaxed);
    return peers_.send(address, EdgeFrameMsg{session_, static_cast<uint64_t>(step), static_cast<uint64_t>(edge), to,
                                             std::move(value)});
  }

  Status return_credit(const std::string& to, int64_t edge) override {
    AF_ASSIGN_OR_RETURN(std::string address, address_of(to));
    if (address == peers_.self()) {
      local_.deliver_credit(session_, to, edge);
      return Status::OK();
    }
    return peers_.send(address, CreditMsg{session_, static_cast<uint64_t>(edge), to});
  }

 private:
  Result<std::string> address_of(const std::string& location) const {
    auto it = addresses_.find(location);
    if (it == addresses_.end()) return not_found("no daemon address for location " + location);
    return it->second;
  }
  uint64_t session_;
  std::map<std::string, std::string> addresses_;
  PeerTable& peers_;
  PartitionService& local_;
};

}  // namespace

Status PartitionService::client_gone() { return Status(Code::cancelled, "the client of this partition went away"); }
Status PartitionService::closed_by_client() { return Status(Code::cancelled, "the partition was closed by its client"); }

struct PartitionService::Entry {
  uint64_t owner = 0;
  uint64_t session = 0;
  std::string location;
  std::shared_ptr<runtime::EdgeRendezvous> rendezvous;
  std::shared_ptr<ResourceMgr> variables;
  std::set<std::string> peers;  // the other daemons of its kind of step (addresses)
  std::unique_ptr<runtime::PartitionExecutor> executor;
};

PartitionService::PartitionService(std::string where, PeerTable& peers) : where_(std::move(where)), peers_(peers) {}

PartitionService::~PartitionService() {
  std::map<uint64_t, std::shared_ptr<Entry>> gone;
  std::lock_guard<std::mutex> lock(mu_);
  gone.swap(entries_);
}

Result<uint64_t> PartitionService::register_partition(const RegisterGraphMsg& m, uint64_t owner,
                                                      DaemonClient::Clock::time_point deadline) {
  std::map<std::string, std::string> addresses(m.peers.begin(), m.peers.end());
  if (!addresses.count(m.location))
    return invalid_argument("the partition for " + m.location + " lists no daemon address for its own location");
  for (auto& [loc, address] : addresses) AF_RETURN_IF_ERROR(peers_.connect_if_lower(address, deadline, loc));
  auto graph = Graph::deserialize(m.graph_def);
  if (!graph.ok()) return graph.status().with_context("the partition for " + m.location + " on " + where_);
  auto e = std::make_shared<Entry>();
  for (auto& [loc, address] : addresses)
    if (address != peers_.self()) e->peers.insert(address);
  auto transport = std::make_shared<PeerEdges>(m.session, std::move(addresses), peers_, *this);
  e->owner = owner;
  e->session = m.session;
  e->location = m.location;
  e->rendezvous = std::make_shared<runtime::EdgeRendezvous>(m.location, transport, m.edge_capacity);
  SessionOptions opts;
  opts.edge_capacity = m.edge_capacity < 1 ? 2 : m.edge_capacity;
  if (!m.container.empty()) {
    std::lock_guard<std::mutex> lock(mu_);
    auto& slot = containers_[{m.container, m.location}];
    if (!slot) slot = std::make_shared<ResourceMgr>();
    e->variables = slot;
  } else if (m.variable_scope != 0) {
    std::lock_guard<std::mutex> lock(mu_);
    auto& slot = variables_[{m.variable_scope, m.location}];
    e->variables = slot.lock();
    if (!e->variables) {
      e->variables = std::make_shared<ResourceMgr>();
      slot = e->variables;
    }
  }
  auto ex = runtime::make_partition_executor(std::move(graph).value(), e->rendezvous, opts, e->variables);
  if (!ex.ok()) return ex.status().with_context("the partition for " + m.location + " on " + where_);
  e->executor = std::move(ex).value();
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t handle = next_handle_++;
  entries_[handle] = e;
  routes_[{m.session, m.location}] = e;
  return handle;
}

struct PartitionService::Started {
  std::shared_ptr<Entry> entry;
  std::shared_ptr<runtime::StartedStep> step;
  std::vector<std::string> fetches;
  StepDoneMsg failed;  // set when the step could not start
};

bool PartitionService::ended(const Started& s) { return !s.step || s.step->ended(); }

size_t PartitionService::size() {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_.size();
}

StepDoneMsg PartitionService::run_step(const RunStepMsg& m, uint64_t owner) {
  auto s = start_step(m, owner);
  return finish_step(*s);
}

std::shared_ptr<PartitionService::Started> PartitionService::start_step(const RunStepMsg& m, uint64_t owner) {
  auto started = std::make_shared<Started>();
  StepDoneMsg& done = started->failed;
  done.step_id = m.step_id;
  started->fetches = m.fetches;
  std::shared_ptr<Entry> e;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = entries_.find(m.handle);
    if (it != entries_.end() && it->second->owner == owner) e = it->second;
  }
  if (!e) {
    done.status = not_found("no partition with handle " + std::to_string(m.handle) + " on " + where_);
    return started;
  }
  started->entry = e;
  std::vector<std::pair<std::string, Tensor>> feeds;
  for (auto& [name, value] : m.feeds) {
    if (!value.status.ok()) {
      done.status = value.status.with_context("the feed '" + name + "' on " + where_);
      return started;
    }
    feeds.emplace_back(name, value.tensor);
  }
  auto step = e->executor->start_step(static_cast<int64_t>(m.step_id), feeds, m.fetches, m.targets, m.timeout_ms);
  if (!step.ok()) done.status = step.status().with_context("on " + e->location + " (" + where_ + ")");
  else started->step = std::move(step).value();
  return started;
}

StepDoneMsg PartitionService::finish_step(Started& s) {
  if (!s.step) return std::move(s.failed);
  StepDoneMsg done;
  done.step_id = s.failed.step_id;
  auto out = s.entry->executor->finish_step(*s.step);
  if (!out.ok()) {
    done.status = out.status().with_context("on " + s.entry->location + " (" + where_ + ")");
    return done;
  }
  for (size_t i = 0; i < out->size(); ++i) {
    TensorMessage tm;
    tm.step_id = static_cast<int64_t>(done.step_id);
    tm.producer = s.fetches[i];
    tm.tensor = std::move((*out)[i]);
    done.fetched.push_back(std::move(tm));
  }
  return done;
}

void PartitionService::abort_step(uint64_t handle, uint64_t step, const Status& why, uint64_t owner) {
  std::shared_ptr<Entry> e;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = entries_.find(handle);
    if (it != entries_.end() && it->second->owner == owner) e = it->second;
  }
  if (e) e->executor->abort_step(static_cast<int64_t>(step), why);
}

bool PartitionService::close_graph(uint64_t handle, uint64_t owner) {
  std::shared_ptr<Entry> gone;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(handle);
  if (it != entries_.end() && it->second->owner == owner) {
    gone = std::move(it->second);
    entries_.erase(it);
  }
  // Steps waiting for edges from the other partitions would otherwise hold the executor's
  // close until their deadline.
  if (gone) gone->rendezvous->abort_all(closed_by_client());
  return gone != nullptr;
}

void PartitionService::abort_where(const std::function<bool(uint64_t, const Entry&)>& pick, const Status& why) {
  std::vector<std::shared_ptr<runtime::EdgeRendezvous>> picked;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [handle, e] : entries_)
      if (pick(handle, *e)) picked.push_back(e->rendezvous);
  }
  for (auto& r : picked) r->abort_all(why);
}

void PartitionService::abort_graph(uint64_t handle, uint64_t owner, const Status& why) {
  abort_where([&](uint64_t h, const Entry& e) { return h == handle && e.owner == owner; }, why);
}

void PartitionService::abort_owner(uint64_t owner, const Status& why) {
  abort_where([&](uint64_t, const Entry& e) { return e.owner == owner; }, why);
}

void PartitionService::peer_lost(const std::string& address, const Status& why) {
  abort_where([&](uint64_t, const Entry& e) { return e.peers.count(address) > 0; }, why);
}

size_t PartitionService::close_owner(uint64_t owner) {
  std::vector<std::shared_ptr<Entry>> gone;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = entries_.begin(); it != entries_.end();) {
      if (it->second->owner == owner) {
        gone.push_back(std::move(it->second));
        it = entries_.erase(it);
      } else {
        ++it;
      }
    }
  }
  // The client is gone: its steps in flight end now rather than at their deadline, which
  // also frees the worker threads a closing executor would hold.
  for (auto& e : gone) e->rendezvous->abort_all(client_gone());
  return gone.size();
}

Result<std::shared_ptr<runtime::EdgeRendezvous>> PartitionService::route(uint64_t session, const std::string& location,
                                                                          const EdgeSource* from) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = routes_.find({session, location});
  if (it == routes_.end()) return std::shared_ptr<runtime::EdgeRendezvous>();
  auto e = it->second.lock();
  if (!e) {
    routes_.erase(it);
    return std::shared_ptr<runtime::EdgeRendezvous>();
  }
  if (from && !(from->owner != 0 && from->owner == e->owner) &&
      !(!from->peer_address.empty() && e->peers.count(from->peer_address)))
    return Status(Code::failed_precondition,
                  "an Edge or Credit frame for a session that this connection" +
                      (from->peer_address.empty() ? std::string() : " (peer daemon " + from->peer_address + ")") +
                      " neither registered nor was named a peer of, at " + location);
  return e->rendezvous;
}

void PartitionService::deliver_edge(uint64_t session, const std::string& to, int64_t step, int64_t edge,
                                    runtime::EdgeValue value) {
  // A frame for a session whose partition is gone (closed, or the client went away) has
  // no one to wait for it.
  if (auto r = route(session, to, nullptr); r.ok() && *r) (*r)->on_edge(step, edge, std::move(value));
}

void PartitionService::deliver_credit(uint64_t session, const std::string& to, int64_t edge) {
  if (auto r = route(session, to, nullptr); r.ok() && *r) (*r)->on_credit(edge);
}

Status PartitionService::deliver(const Message& m, const EdgeSource& from) {
  if (auto* e = std::get_if<EdgeFrameMsg>(&m)) {
    AF_ASSIGN_OR_RETURN(auto r, route(e->session, e->to_location, &from));
    g_edge_bytes_received.fetch_add(e->value.tensor.valid() ? e->value.tensor.bytes() : 0, std::memory_order_relaxed);
    if (r) r->on_edge(static_cast<int64_t>(e->step_id), static_cast<int64_t>(e->edge), e->value);
  } else if (auto* c = std::get_if<CreditMsg>(&m)) {
    AF_ASSIGN_OR_RETURN(auto r, route(c->session, c->to_location, &from));
    if (r) r->on_credit(static_cast<int64_t>(c->edge));
  }
  return Status::OK();
}

EdgeTraffic edge_traffic() {
  return {g_edge_bytes_sent.load(std::memory_order_relaxed), g_edge_bytes_received.load(std::memory_order_relaxed)};
}

}  // namespace actorflow::net
