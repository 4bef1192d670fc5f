// Registered graphs and their steps on a node daemon (worker_service.h).
#include "worker_service.h"

#include <algorithm>

#include "actorflow/runtime/caller_step.h"
#include "actorflow/tensor_codec.h"

namespace actorflow::net {

// ---- WorkerPool ----

WorkerPool::WorkerPool(int threads, int max_threads) {
  threads = std::max(1, threads);
  max_threads_ = static_cast<size_t>(std::max(threads, max_threads));
  std::lock_guard<std::mutex> lock(mu_);
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { loop(); });
}

WorkerPool::~WorkerPool() { stop(); }

void WorkerPool::post(std::function<void()> job) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    jobs_.push_back(std::move(job));
    if (!stopping_ && static_cast<size_t>(idle_) < jobs_.size() && threads_.size() < max_threads_)
      threads_.emplace_back([this] { loop(); });
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
  // No thread is added once stopping_ is set: the vector holds still.
  for (auto& t : threads_)
    if (t.joinable()) t.join();
  std::lock_guard<std::mutex> lock(mu_);
  threads_.clear();
}

int WorkerPool::busy() const {
  std::lock_guard<std::mutex> lock(mu_);
  return running_ + static_cast<int>(jobs_.size());
}

void WorkerPool::loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    ++idle_;
    cv_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
    --idle_;
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
  // The Callables use the session, and the session the graph: free them in that order.
  inline_kinds.clear();
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
  {
    // Steps are prepared afresh on the grown graph.
    std::lock_guard<std::mutex> kinds(entry->kinds_mu);
    entry->inline_kinds.clear();
  }
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

namespace {

std::string step_kind(const RunStepMsg& m) {
  std::string k;
  for (auto& [name, value] : m.feeds) k += "f" + name + ";";
  for (auto& name : m.fetches) k += "o" + name + ";";
  for (auto& name : m.targets) k += "t" + name + ";";
  return k;
}

}  // namespace

Result<WorkerService::Resolved> WorkerService::resolve(Graph& g, const RunStepMsg& m) {
  Resolved r;
  for (auto& [name, value] : m.feeds) {
    AF_ASSIGN_OR_RETURN(Output out, g.find_output(name));
    if (!value.status.ok()) return value.status.with_context("the feed '" + name + "'");
    r.feeds.emplace_back(out, value.tensor);
  }
  for (auto& name : m.fetches) {
    AF_ASSIGN_OR_RETURN(Output out, g.find_output(name));
    r.fetches.emplace_back(out);
  }
  for (auto& name : m.targets) {
    const Node* n = g.find_node(name);
    if (!n) return not_found("no node '" + name + "' in the registered graph");
    r.targets.emplace_back(&g, n->id);
  }
  return r;
}

Result<std::vector<Tensor>> WorkerService::run_entry(Entry& e, const RunStepMsg& m) {
  AF_ASSIGN_OR_RETURN(Resolved r, resolve(*e.graph, m));
  RunOptions options;
  options.timeout_ms = m.timeout_ms;
  auto out = e.session->run(options, r.fetches, r.feeds, r.targets);
  // A step that ran to its end on this thread, and succeeded, vouches for its kind: the
  // io thread may run the next ones, through a Callable made now.
  if (runtime::take_caller_step() && out.ok()) {
    std::string kind = step_kind(m);
    {
      std::lock_guard<std::mutex> lock(e.kinds_mu);
      if (e.inline_kinds.count(kind) || e.inline_kinds.size() >= kMaxInlineKinds) return out;
    }
    std::vector<Output> fed;
    for (auto& [o, t] : r.feeds) fed.push_back(o);
    auto call = e.session->make_callable(r.fetches, fed, r.targets);
    std::lock_guard<std::mutex> lock(e.kinds_mu);
    if (call.ok()) e.inline_kinds.emplace(std::move(kind), std::move(*call));
  }
  return out;
}

void WorkerService::forget_kind(Entry& e, const RunStepMsg& m) {
  std::lock_guard<std::mutex> lock(e.kinds_mu);
  e.inline_kinds.erase(step_kind(m));
}

StepDoneMsg WorkerService::finish(const RunStepMsg& m, Result<std::vector<Tensor>> out) {
  StepDoneMsg done;
  done.step_id = m.step_id;
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

StepDoneMsg WorkerService::run_step(const RunStepMsg& m, uint64_t owner) {
  auto entry = find(m.handle, owner);
  if (!entry) {
    StepDoneMsg done;
    done.step_id = m.step_id;
    done.status = not_found("no graph with handle " + std::to_string(m.handle) + " on " + where_ +
                            " (closed, or registered before the daemon restarted)");
    return done;
  }
  Result<std::vector<Tensor>> out = internal_error("unset");
  (void)runtime::take_caller_step();
  try {
    std::shared_lock<std::shared_mutex> lock(entry->mu);
    out = run_entry(*entry, m);
  } catch (...) {
    out = status_from_current_exception();
  }
  return finish(m, std::move(out));
}

std::optional<StepDoneMsg> WorkerService::try_run_inline(const RunStepMsg& m, uint64_t owner) {
  auto entry = find(m.handle, owner);
  if (!entry) return std::nullopt;
  Callable call;
  {
    std::lock_guard<std::mutex> lock(entry->kinds_mu);
    if (entry->inline_kinds.empty()) return std::nullopt;
    auto it = entry->inline_kinds.find(step_kind(m));
    if (it == entry->inline_kinds.end()) return std::nullopt;
    call = it->second;
  }
  std::shared_lock<std::shared_mutex> lock(entry->mu, std::try_to_lock);
  if (!lock.owns_lock()) return std::nullopt;
  // The kind's feeds come in the order of its key, the Callable's order.
  std::vector<Tensor> feeds;
  feeds.reserve(m.feeds.size());
  for (auto& [name, value] : m.feeds) {
    if (!value.status.ok()) return finish(m, value.status.with_context("the feed '" + name + "'"));
    feeds.push_back(value.tensor);
  }
  RunOptions options;
  options.timeout_ms = m.timeout_ms;
  Result<std::vector<Tensor>> out = internal_error("unset");
  (void)runtime::take_caller_step();
  try {
    out = call(feeds, options);
  } catch (...) {
    out = status_from_current_exception();
  }
  if (!runtime::take_caller_step()) forget_kind(*entry, m);
  return finish(m, std::move(out));
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
