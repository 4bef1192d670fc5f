// Registered graphs and their steps on a node daemon (worker_service.h).
#include "worker_service.h"

#include <algorithm>

#include "actorflow/tensor_codec.h"

namespace actorflow::net {

// ---- WorkerPool ----

WorkerPool::WorkerPool(int threads) {
  for (int i = 0; i < std::max(1, threads); ++i) threads_.emplace_back([this] { loop(); });
}

WorkerPool::~WorkerPool() { stop(); }

void WorkerPool::post(std::function<void()> job) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    jobs_.push_back(std::move(job));
  }
  cv_.notify_one();
}

bool WorkerPool::drain(std::chrono::steady_clock::time_point deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  return idle_cv_.wait_until(lock, deadline, [this] { return jobs_.empty() && running_ == 0; });
}

void WorkerPool::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_)
    if (t.joinable()) t.join();
  threads_.clear();
}

int WorkerPool::busy() const {
  std::lock_guard<std::mutex> lock(mu_);
  return running_ + static_cast<int>(jobs_.size());
}

void WorkerPool::loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
    if (jobs_.empty()) return;  // stopping, and nothing left
    auto job = std::move(jobs_.front());
    jobs_.pop_front();
    ++running_;
    lock.unlock();
    job();
    lock.lock();
    --running_;
    if (jobs_.empty() && running_ == 0) idle_cv_.notify_all();
  }
}

// ---- WorkerService ----

WorkerService::Entry::~Entry() {
  // The session uses the graph: close it first.
  session.reset();
  graph.reset();
}

WorkerService::WorkerService(std::string where) : where_(std::move(where)) {}

WorkerService::~WorkerService() {
  std::map<uint64_t, std::shared_ptr<Entry>> graphs;
  {
    std::lock_guard<std::mutex> lock(mu_);
    graphs.swap(graphs_);
  }
}

Result<uint64_t> WorkerService::register_graph(const std::string& graph_def, uint64_t owner) {
  auto graph = Graph::deserialize(graph_def);
  if (!graph.ok()) return graph.status().with_context("registering a graph on " + where_);
  auto entry = std::make_shared<Entry>();
  entry->owner = owner;
  entry->graph = std::move(graph).value();
  auto session = Session::create(*entry->graph);
  if (!session.ok()) return session.status().with_context("registering a graph on " + where_);
  entry->session = std::make_unique<Session>(std::move(session).value());
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t handle = next_handle_++;
  graphs_[handle] = std::move(entry);
  return handle;
}

Status WorkerService::extend_graph(uint64_t handle, const std::string& graph_def, uint64_t owner) {
  auto entry = find(handle, owner);
  if (!entry) return not_found("no graph with handle " + std::to_string(handle) + " to extend on " + where_);
  auto full = Graph::deserialize(graph_def);
  if (!full.ok()) return full.status().with_context("extending graph " + std::to_string(handle) + " on " + where_);
  std::unique_lock<std::shared_mutex> lock(entry->mu);
  Graph& g = *entry->graph;
  const Graph& f = **full;
  if (f.num_nodes() < g.num_nodes())
    return invalid_argument("the graph sent to extend graph " + std::to_string(handle) + " has fewer nodes (" +
                            std::to_string(f.num_nodes()) + ") than the one registered (" +
                            std::to_string(g.num_nodes()) + ")");
  for (int i = 0; i < g.num_nodes(); ++i)
    if (f.node(i).name != g.node(i).name || f.node(i).op != g.node(i).op)
      return invalid_argument("the graph sent to extend graph " + std::to_string(handle) + " differs at node " +
                              std::to_string(i) + " ('" + f.node(i).name + "', registered: '" + g.node(i).name + "')");
  for (int i = g.num_nodes(); i < f.num_nodes(); ++i) {
    auto added = g.add_node_raw(f.node(i));
    if (!added.ok()) return added.status().with_context("extending graph " + std::to_string(handle) + " on " + where_);
  }
  for (auto& [key, ids] : f.collections())
    for (int id : ids)
      if (id >= 0 && id < g.num_nodes()) {
        const auto& have = g.collection(key);
        if (std::find(have.begin(), have.end(), id) == have.end()) g.add_to_collection(key, id);
      }
  return Status::OK();
}

std::shared_ptr<WorkerService::Entry> WorkerService::find(uint64_t handle, uint64_t owner) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = graphs_.find(handle);
  // Another connection's handle is as good as unknown: clients cannot reach each other's graphs.
  if (it == graphs_.end() || it->second->owner != owner) return nullptr;
  return it->second;
}

Result<std::vector<Tensor>> WorkerService::run_entry(Entry& e, const RunStepMsg& m) {
  std::shared_lock<std::shared_mutex> lock(e.mu);
  Graph& g = *e.graph;
  FeedDict feeds;
  for (auto& [name, value] : m.feeds) {
    AF_ASSIGN_OR_RETURN(Output out, g.find_output(name));
    if (!value.status.ok()) return value.status.with_context("the feed '" + name + "'");
    feeds.emplace_back(out, value.tensor);
  }
  std::vector<Fetch> fetches;
  for (auto& name : m.fetches) {
    AF_ASSIGN_OR_RETURN(Output out, g.find_output(name));
    fetches.emplace_back(out);
  }
  std::vector<Operation> targets;
  for (auto& name : m.targets) {
    const Node* n = g.find_node(name);
    if (!n) return not_found("no node '" + name + "' in the registered graph");
    targets.emplace_back(&g, n->id);
  }
  RunOptions options;
  options.timeout_ms = m.timeout_ms;
  return e.session->run(options, fetches, feeds, targets);
}

StepDoneMsg WorkerService::run_step(const RunStepMsg& m, uint64_t owner) {
  StepDoneMsg done;
  done.step_id = m.step_id;
  auto entry = find(m.handle, owner);
  if (!entry) {
    done.status = not_found("no graph with handle " + std::to_string(m.handle) + " on " + where_ +
                            " (closed, or registered before the daemon restarted)");
    return done;
  }
  Result<std::vector<Tensor>> out = internal_error("unset");
  try {
    out = run_entry(*entry, m);
  } catch (...) {
    out = status_from_current_exception();
  }
  if (!out.ok()) {
    done.status = out.status().with_context("on " + where_);
    return done;
  }
  done.fetched.reserve(out->size());
  for (size_t i = 0; i < out->size(); ++i) {
    TensorMessage tm;
    tm.step_id = static_cast<int64_t>(m.step_id);
    tm.producer = m.fetches[i];
    tm.tensor = std::move((*out)[i]);
    done.fetched.push_back(std::move(tm));
  }
  return done;
}

void WorkerService::close_graph(uint64_t handle, uint64_t owner) {
  std::shared_ptr<Entry> gone;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = graphs_.find(handle);
  if (it != graphs_.end() && it->second->owner == owner) {
    gone = std::move(it->second);
    graphs_.erase(it);
  }
}

size_t WorkerService::close_owner(uint64_t owner) {
  std::vector<std::shared_ptr<Entry>> gone;
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = graphs_.begin(); it != graphs_.end();) {
    if (it->second->owner == owner) {
      gone.push_back(std::move(it->second));
      it = graphs_.erase(it);
    } else {
      ++it;
    }
  }
  return gone.size();
}

size_t WorkerService::num_graphs() const {
  std::lock_guard<std::mutex> lock(mu_);
  return graphs_.size();
}

}  // namespace actorflow::net
