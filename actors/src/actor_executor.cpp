// Prepares one step plan as a set of node actors and starts steps on it.
#include <cstdio>
#include <map>
#include <mutex>

#include "actorflow/op_registry.h"

#include "actor_count_internal.h"
#include "graph_passes.h"
#include "node_actor.h"

namespace actorflow::runtime {
namespace {

struct FeedRoute {
  std::vector<std::pair<int, int>> consumers;  // (actor, slot)
  std::vector<int> results;                    // fetches of the fed tensor itself
};

class ActorExecutor final : public Executor {
 public:
  explicit ActorExecutor(std::shared_ptr<ExecutorShared> shared) : shared_(std::move(shared)) {}
  ~ActorExecutor() override { shutdown(); }

  Status build(const OptimizedPlan& optimized) {
    const StepPlan& plan = optimized.plan();
    auto& nodes = shared_->nodes;
    nodes.resize(plan.nodes.size());
    std::map<int, int> index;  // node id -> actor index
    for (size_t i = 0; i < plan.nodes.size(); ++i) index[plan.nodes[i]] = static_cast<int>(i);
    std::map<Endpoint, int> feed_of;
    for (size_t f = 0; f < plan.feeds.size(); ++f) feed_of[plan.feeds[f]] = static_cast<int>(f);
    feeds_.resize(plan.feeds.size());
    const ExecutorEnv& env = shared_->env;
    auto encoded = [&](const Node& a, const Node& b) {
      return env.encode_all_edges || env.encode_nodes.count(a.name) || env.encode_nodes.count(b.name);
    };

    for (size_t i = 0; i < plan.nodes.size(); ++i) {
      const Node& n = optimized.node(plan.nodes[i]);
      NodeRuntime& rt = nodes[i];
      rt.node = &n;
      AF_ASSIGN_OR_RETURN(KernelCache::Entry k, env.kernels->get(n));
      rt.kernel = std::move(k.kernel);
      rt.kernel_mu = std::move(k.mu);
      rt.out.resize(static_cast<size_t>(n.num_outputs()));
      int num_data = static_cast<int>(n.inputs.size());
      rt.num_slots = num_data + static_cast<int>(n.control_inputs.size());
      rt.bound.resize(static_cast<size_t>(num_data));
      rt.in_edges.resize(static_cast<size_t>(rt.num_slots));
      for (int j = 0; j < num_data; ++j) {
        const Endpoint& e = n.inputs[static_cast<size_t>(j)];
        auto fed = feed_of.find(e);
        if (fed != feed_of.end()) {
          feeds_[static_cast<size_t>(fed->second)].consumers.push_back({static_cast<int>(i), j});
          ++rt.dynamic_slots;
          continue;
        }
        const Node& p = optimized.node(e.node);
        if (p.op == "Const") {
          // Constants are bound once at prepare time instead of travelling every step.
          rt.bound[static_cast<size_t>(j)] = *p.attr_tensor("value");
          continue;
        }
        NodeRuntime& prt = nodes[static_cast<size_t>(index.at(e.node))];
        OutEdge oe{static_cast<int>(i), j, prt.num_credits++, encoded(p, n)};
        prt.out[static_cast<size_t>(e.index)].push_back(oe);
        rt.in_edges[static_cast<size_t>(j)] = {index.at(e.node), oe.credit};
        ++rt.dynamic_slots;
      }
      for (size_t k = 0; k < n.control_inputs.size(); ++k) {
        auto it = index.find(n.control_inputs[k]);
        if (it == index.end()) continue;  // a fed node: nothing to wait for
        NodeRuntime& prt = nodes[static_cast<size_t>(it->second)];
        OutEdge oe{static_cast<int>(i), num_data + static_cast<int>(k), prt.num_credits++, false};
        prt.control_out.push_back(oe);
        rt.in_edges[static_cast<size_t>(num_data) + k] = {it->second, oe.credit};
        ++rt.dynamic_slots;
      }
    }
    num_results_ = static_cast<int>(plan.fetches.size());
    for (size_t r = 0; r < plan.fetches.size(); ++r) {
      const Endpoint& e = plan.fetches[r];
      if (e.node < 0) continue;
      auto fed = feed_of.find(e);
      if (fed != feed_of.end()) {
        feeds_[static_cast<size_t>(fed->second)].results.push_back(static_cast<int>(r));
        continue;
      }
      nodes[static_cast<size_t>(index.at(e.node))].fetches.push_back({e.index, static_cast<int>(r)});
      ++pending_;
    }
    for (int id : plan.fetch_ops) {
      auto it = index.find(id);
      if (it == index.end()) continue;
      nodes[static_cast<size_t>(it->second)].finishes++;
      ++pending_;
    }
    for (size_t i = 0; i < nodes.size(); ++i) {
      NodeRuntime& rt = nodes[i];
      bool has_out = !rt.control_out.empty() || !rt.fetches.empty() || rt.finishes > 0;
      for (auto& o : rt.out) has_out = has_out || !o.empty();
      rt.inert = rt.dynamic_slots == 0 && !has_out;
      rt.is_source = rt.dynamic_slots == 0 && !rt.inert;
      if (rt.is_source) sources_.push_back(static_cast<int>(i));
    }
    auto& sys = actor_system();
    shared_->actors.resize(nodes.size());
    for (auto& n : nodes) shared_->live_actors += n.inert ? 0 : 1;
    for (size_t i = 0; i < nodes.size(); ++i) {
      if (nodes[i].inert) continue;
      shared_->actors[i] = sys.spawn<NodeActor>(shared_, static_cast<int>(i));
      g_node_actors_spawned.fetch_add(1, std::memory_order_relaxed);
    }
    return Status::OK();
  }

  std::shared_ptr<StepState> start(const std::vector<Tensor>& feeds, int64_t global_step) override {
    auto state = std::make_shared<StepState>(global_step, num_results_, pending_ + 1);
    int64_t step;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (closed_) {
        state->cancel(cancelled("session is closed"));
        return state;
      }
      step = next_step_++;
      live_.push_back(state);
      if (live_.size() > 64) prune_live();
    }
    for (size_t f = 0; f < feeds_.size(); ++f) {
      const Tensor& t = feeds[f];
      for (int r : feeds_[f].results) state->set_result(r, t);
      for (auto [actor, slot] : feeds_[f].consumers) {
        EdgeMsg m;
        m.step = step;
        m.slot = slot;
        m.tensor = t;
        m.state = state;
        caf::anon_send(shared_->actors[static_cast<size_t>(actor)], input_atom::value, std::move(m));
      }
    }
    for (int s : sources_) caf::anon_send(shared_->actors[static_cast<size_t>(s)], start_atom::value, StartMsg{step, state});
    // The extra count taken at creation keeps the step open until every message is out.
    state->finish_one();
    return state;
  }

  void shutdown() override {
    std::vector<std::shared_ptr<StepState>> live;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (closed_) return;
      closed_ = true;
      shared_->closing.store(true, std::memory_order_release);
      for (auto& w : live_)
        if (auto s = w.lock()) live.push_back(std::move(s));
      live_.clear();
    }
    for (auto& a : shared_->actors)
      if (a) caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
    for (auto& s : live)
      if (!s->done()) s->cancel(cancelled("session closed while the step was running"));
    // A kernel cannot be interrupted: wait for the ones running (a step past its
    // deadline may still be in one), so no actor touches the graph after close().
    std::unique_lock<std::mutex> lock(shared_->live_mu);
    bool warned = false;
    while (!shared_->live_cv.wait_for(lock, std::chrono::seconds(10), [&] { return shared_->live_actors == 0; })) {
      if (!warned)
        std::fprintf(stderr, "actorflow: closing a session waits for %d node(s) still inside a kernel\n",
                     shared_->live_actors);
      warned = true;
    }
  }

  Status health() const override {
    std::lock_guard<std::mutex> lock(shared_->broken_mu);
    return shared_->broken;
  }

  int num_actors() const override {
    int n = 0;
    for (auto& a : shared_->actors) n += a ? 1 : 0;
    return n;
  }

 private:
  void prune_live() {
    std::vector<std::weak_ptr<StepState>> keep;
    for (auto& w : live_) {
      auto s = w.lock();
      if (s && !s->done()) keep.push_back(w);
    }
    live_.swap(keep);
  }

  std::shared_ptr<ExecutorShared> shared_;
  std::vector<FeedRoute> feeds_;
  std::vector<int> sources_;
  int num_results_ = 0;
  int pending_ = 0;
  std::mutex mu_;
  int64_t next_step_ = 0;
  bool closed_ = false;
  std::vector<std::weak_ptr<StepState>> live_;
};

}  // namespace

Result<KernelCache::Entry> KernelCache::get(const Node& node) {
  std::lock_guard<std::mutex> lock(mu_);
  auto key = std::make_pair(node.id, node.op);
  auto it = entries_.find(key);
  if (it != entries_.end()) return it->second;
  AF_ASSIGN_OR_RETURN(std::unique_ptr<OpKernel> k, KernelRegistry::global().create(node, DeviceType::CPU));
  Entry e;
  e.kernel = std::move(k);
  const OpDef* def = OpRegistry::global().find(node.op);
  if (def && def->stateful) e.mu = std::make_shared<std::mutex>();
  entries_[key] = e;
  return e;
}

Result<std::unique_ptr<Executor>> make_actor_executor(std::shared_ptr<const OptimizedPlan> plan, const ExecutorEnv& env) {
  auto shared = std::make_shared<ExecutorShared>();
  shared->env = env;
  shared->plan = std::move(plan);
  shared->device_name = env.device ? "/cpu:" + std::to_string(env.device->id().index) : "/cpu:0";
  auto ex = std::make_unique<ActorExecutor>(shared);
  AF_RETURN_IF_ERROR(ex->build(*shared->plan));
  return std::unique_ptr<Executor>(std::move(ex));
}

}  // namespace actorflow::runtime
