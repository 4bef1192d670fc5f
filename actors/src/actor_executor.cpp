// Prepares one step plan as a set of node actors and starts steps on it.
#include <atomic>
#include <cstdio>
#include <map>
#include <mutex>
#include <thread>

#include "actorflow/op_registry.h"
#include "actorflow/ops/gpu.h"

#include "actor_count_internal.h"
#include "actorflow/runtime/run_path.h"
#include "cheap_ops.h"
#include "graph_passes.h"
#include "inline_step.h"
#include "in_place_runner.h"
#include "node_actor.h"
#include "run_placement.h"

namespace actorflow::runtime {
namespace {

class ActorExecutor final : public Executor {
 public:
  explicit ActorExecutor(std::shared_ptr<ExecutorShared> shared) : shared_(std::move(shared)) {}
  ~ActorExecutor() override { shutdown(); }

  Status build(const OptimizedPlan& optimized) {
    const StepPlan& plan = optimized.plan();
    auto& nodes = shared_->nodes;
    nodes.resize(plan.nodes.size());
    std::map<int, int> index;  // node id -> node index
    for (size_t i = 0; i < plan.nodes.size(); ++i) index[plan.nodes[i]] = static_cast<int>(i);
    std::map<Endpoint, int> feed_of;
    for (size_t f = 0; f < plan.feeds.size(); ++f) feed_of[plan.feeds[f]] = static_cast<int>(f);
    feeds_.resize(plan.feeds.size());
    const ExecutorEnv& env = shared_->env;
    auto encoded = [&](const Node& a, const Node& b) {
      return env.encode_all_edges || env.encode_nodes.count(a.name) || env.encode_nodes.count(b.name);
    };
    // The producer node index of every input that travels per step (-1: fed or bound);
    // data inputs first, then control inputs, as the slots.
    std::vector<std::vector<int>> producers(nodes.size());
    bool any_encoded = false;

    for (size_t i = 0; i < plan.nodes.size(); ++i) {
      const Node& n = optimized.node(plan.nodes[i]);
      NodeRuntime& rt = nodes[i];
      rt.node = &n;
      rt.head = static_cast<int>(i);
      const DeviceId dev = optimized.device(plan.nodes[i]);
      AF_ASSIGN_OR_RETURN(KernelCache::Entry k, env.kernels->get(n, dev));
      if (dev.type == DeviceType::GPU) {
        // The node's kernels run with its GPU's context (streams, device memory).
        Result<DeviceContext*> ctx = gpu_device_context(dev.index);
        if (!ctx.ok()) return ctx.status().with_context(n.op + " '" + n.name + "' placed on " + dev.to_string());
        rt.device = *ctx;
      }
      rt.kernel = std::move(k.kernel);
      rt.kernel_mu = std::move(k.mu);
      rt.out.resize(static_cast<size_t>(n.num_outputs()));
      int num_data = static_cast<int>(n.inputs.size());
      rt.num_slots = num_data + static_cast<int>(n.control_inputs.size());
      rt.bound.resize(static_cast<size_t>(num_data));
      rt.in_edges.resize(static_cast<size_t>(rt.num_slots));
      auto& prod = producers[i];
      prod.assign(static_cast<size_t>(rt.num_slots), -1);
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
        prod[static_cast<size_t>(j)] = index.at(e.node);
        any_encoded = any_encoded || encoded(p, n);
      }
      for (size_t k = 0; k < n.control_inputs.size(); ++k) {
        auto it = index.find(n.control_inputs[k]);
        if (it == index.end()) continue;  // a fed node: nothing to wait for
        prod[static_cast<size_t>(num_data) + k] = it->second;
      }
    }
    AF_ASSIGN_OR_RETURN(order_, topological_order(producers));
    std::vector<char> cheap(nodes.size());
    for (size_t i = 0; i < nodes.size(); ++i) {
      cheap[i] = is_cheap(*nodes[i].node, *nodes[i].kernel) ? 1 : 0;
      nodes[i].cheap = cheap[i] != 0;
    }
    RunPath path = run_path();
    path.colocate_cheap_ops = path.colocate_cheap_ops && env.colocate_cheap_ops;
    path.caller_runs_cheap_steps = path.caller_runs_cheap_steps && env.caller_runs_small_steps;
    path.caller_runs_serial_steps = path.caller_runs_serial_steps && env.caller_runs_small_steps;

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

    // Inert nodes (constants only bound into consumers) never run, so they do not count.
    std::vector<char> consumed(nodes.size(), 0);
    for (auto& prod : producers)
      for (int p : prod)
        if (p >= 0) consumed[static_cast<size_t>(p)] = 1;
    // So far dynamic_slots counts fed slots only.
    std::vector<char> inert(nodes.size(), 0), fed(nodes.size(), 0);
    for (size_t i = 0; i < nodes.size(); ++i) {
      const NodeRuntime& rt = nodes[i];
      fed[i] = rt.dynamic_slots > 0 ? 1 : 0;
      bool inputs = fed[i];
      for (int p : producers[i]) inputs = inputs || p >= 0;
      inert[i] = !inputs && !consumed[i] && rt.fetches.empty() && rt.finishes == 0 ? 1 : 0;
    }
    // A plan with GPU nodes is serial on the host anyway: its compute kernels are done
    // once queued on the one compute stream. Its steps without a deadline run on the
    // caller's thread, which queues every kernel without a hop per node and waits only
    // where a consumer needs an async kernel (a copy) finished; a CPU async kernel (a
    // _Recv, an accumulator) keeps the plan on its actors, where no thread waits for it.
    const bool gpu = optimized.uses_gpu();
    bool gpu_on_caller = false;
    if (gpu) {
      gpu_on_caller = path.caller_runs_serial_steps && !any_encoded;
      for (size_t i = 0; i < nodes.size() && gpu_on_caller; ++i)
        if (!inert[i] && nodes[i].kernel->as_async() && !nodes[i].device) gpu_on_caller = false;
      path.colocate_cheap_ops = path.caller_runs_cheap_steps = path.caller_runs_serial_steps = false;
    }
    caller_runs_ = path.caller_runs_cheap_steps && !any_encoded;
    for (size_t i = 0; i < nodes.size() && caller_runs_; ++i)
      if (!cheap[i] && !inert[i]) caller_runs_ = false;
    serial_ = path.caller_runs_serial_steps && !any_encoded && !caller_runs_ &&
              is_serial(nodes, order_, producers, cheap, inert);
    if (path.caller_runs_serial_steps && path.caller_runs_training_steps && !any_encoded && !caller_runs_ &&
        !serial_) {
      // A training step: stateful kernels (variables, their updates) in a mostly serial plan.
      bool stateful = false;
      std::vector<double> cost(nodes.size(), 0);
      for (size_t i = 0; i < nodes.size(); ++i) {
        if (inert[i]) continue;
        const Node& n = *nodes[i].node;
        stateful = stateful || !is_stateless_sync(n, *nodes[i].kernel);
        std::vector<Shape> in;
        in.reserve(n.inputs.size());
        for (const Endpoint& e : n.inputs) {
          const Node& p = optimized.node(e.node);
          in.push_back(static_cast<size_t>(e.index) < p.output_shapes.size() ? p.output_shapes[static_cast<size_t>(e.index)]
                                                                          : Shape::unknown_rank());
        }
        cost[i] = estimated_cost(n, in);
      }
      serial_ = stateful && is_mostly_serial(nodes, order_, producers, cost, inert, kMostlySerialFraction);
    }
    if (gpu_on_caller) serial_ = true;
    if (path.colocate_cheap_ops && !caller_runs_) colocate_cheap_nodes(nodes, order_, producers, cheap, fed, encoded);

    for (size_t i = 0; i < nodes.size(); ++i) {
      NodeRuntime& rt = nodes[i];
      const Node& n = *rt.node;
      int num_data = static_cast<int>(n.inputs.size());
      for (int j = 0; j < rt.num_slots; ++j) {
        int p = producers[i][static_cast<size_t>(j)];
        if (p < 0) continue;
        NodeRuntime& prt = nodes[static_cast<size_t>(p)];
        bool control = j >= num_data;
        auto& list = control ? prt.control_out : prt.out[static_cast<size_t>(n.inputs[static_cast<size_t>(j)].index)];
        int hp = prt.head;
        if (rt.head != static_cast<int>(i) && rt.head == hp) {
          // Colocated: handed over inside the head's actor, no credit.
          list.push_back(OutEdge{static_cast<int>(i), j, -1, false, true});
          rt.in_edges[static_cast<size_t>(j)] = {-1, 0};
          continue;
        }
        OutEdge oe{static_cast<int>(i), j, nodes[static_cast<size_t>(hp)].num_credits++,
                   !control && encoded(*prt.node, n), false};
        list.push_back(oe);
        rt.in_edges[static_cast<size_t>(j)] = {hp, oe.credit};
        ++rt.dynamic_slots;
      }
    }
    for (size_t i = 0; i < nodes.size(); ++i) {
      NodeRuntime& rt = nodes[i];
      bool member = rt.head != static_cast<int>(i);
      bool has_out = !rt.control_out.empty() || !rt.fetches.empty() || rt.finishes > 0 || !rt.members.empty();
      for (auto& o : rt.out) has_out = has_out || !o.empty();
      rt.inert = !member && rt.dynamic_slots == 0 && !has_out;
      rt.is_source = !member && rt.dynamic_slots == 0 && !rt.inert;
      if (rt.is_source) sources_.push_back(static_cast<int>(i));
    }
    shared_->actors.resize(nodes.size());
    shared_->node_actors.resize(nodes.size(), nullptr);
    if (caller_runs_) return Status::OK();
    auto& sys = actor_system();
    auto has_actor = [&](size_t i) { return !nodes[i].inert && nodes[i].head == static_cast<int>(i); };
    for (size_t i = 0; i < nodes.size(); ++i) shared_->live_actors += has_actor(i) ? 1 : 0;
    shared_->credits.resize(nodes.size());
    for (size_t i = 0; i < nodes.size(); ++i)
      if (has_actor(i) && nodes[i].num_credits > 0)
        shared_->credits[i] = std::make_unique<Credits>(nodes[i].num_credits, shared_->env.edge_capacity);
    for (size_t i = 0; i < nodes.size(); ++i) {
      if (!has_actor(i)) continue;
      shared_->actors[i] = sys.spawn<NodeActor>(shared_, static_cast<int>(i));
      shared_->node_actors[i] = static_cast<NodeActor*>(caf::actor_cast<caf::abstract_actor*>(shared_->actors[i]));
      g_node_actors_spawned.fetch_add(1, std::memory_order_relaxed);
    }
    return Status::OK();
  }

  std::shared_ptr<StepState> start(const std::vector<Tensor>& feeds, int64_t global_step, bool has_deadline) override {
    auto state = std::make_shared<StepState>(global_step, num_results_, pending_ + 1);
    if (caller_runs_ || (serial_ && !has_deadline)) {
      run_here(feeds, *state);
      return state;
    }
    int64_t step;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (closed_) {
        state->cancel(cancelled("session is closed"));
        return state;
      }
      step = next_step_++;
      g_steps_on_actors.fetch_add(1, std::memory_order_relaxed);
      live_.push_back(state);
      if (live_.size() > 64) prune_live();
    }
    // Without a deadline the caller would only wait: it runs the step's actors itself
    // while they are ready (in_place_runner.h). With one, it must be free to stop waiting.
    InPlaceScope here(!has_deadline);
    for (size_t f = 0; f < feeds_.size(); ++f) {
      const Tensor& t = feeds[f];
      for (int r : feeds_[f].results) state->set_result(r, t);
      for (auto [actor, slot] : feeds_[f].consumers) {
        auto m = std::make_unique<NodeMsg>(NodeMsg::Kind::input);
        m->edge.step = step;
        m->edge.slot = slot;
        m->edge.tensor = t;
        m->edge.state = state;
        shared_->node_actors[static_cast<size_t>(actor)]->post(std::move(m));
      }
    }
    for (int s : sources_) {
      auto m = std::make_unique<NodeMsg>(NodeMsg::Kind::start);
      m->edge.step = step;
      m->edge.state = state;
      shared_->node_actors[static_cast<size_t>(s)]->post(std::move(m));
    }
    // The extra count taken at creation keeps the step open until every message is out.
    state->finish_one();
    here.run();
    return state;
  }

  void shutdown() override {
    std::vector<std::shared_ptr<StepState>> live;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (closed_) return;
      closed_ = true;
      closing_here_.store(true);
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
    wait_for_callers();
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
  // A step of an all-cheap, serial or mostly serial (training) plan, on the caller's
  // thread. The count of such steps lets shutdown wait for them: they read the graph, as a
  // kernel inside an actor does; a step still running when the session closes runs no
  // further kernel and fails as cancelled, as the actors cancel theirs.
  void run_here(const std::vector<Tensor>& feeds, StepState& state) {
    running_here_.fetch_add(1);
    if (closing_here_.load()) {
      running_here_.fetch_sub(1);
      state.cancel(cancelled("session is closed"));
      return;
    }
    for (size_t f = 0; f < feeds_.size(); ++f)
      for (int r : feeds_[f].results) state.set_result(r, feeds[f]);
    run_step_inline(*shared_, order_, feeds_, feeds, state, &closing_here_);
    running_here_.fetch_sub(1);
    state.finish_one();
  }

  void wait_for_callers() {
    // Steps of cheap nodes take microseconds; the warning is for a kernel that hangs.
    auto start = std::chrono::steady_clock::now();
    bool warned = false;
    while (running_here_.load() > 0) {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
      if (!warned && std::chrono::steady_clock::now() - start > std::chrono::seconds(10)) {
        std::fprintf(stderr, "actorflow: closing a session waits for %d step(s) running on their callers' threads\n",
                     running_here_.load());
        warned = true;
      }
    }
  }

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
  std::vector<int> order_;  // topological
  bool caller_runs_ = false;  // every step, on the caller's thread (no actors)
  bool serial_ = false;       // steps without a deadline, on the caller's thread (serial or training plans)
  std::atomic<int> running_here_{0};
  std::atomic<bool> closing_here_{false};
  int num_results_ = 0;
  int pending_ = 0;
  std::mutex mu_;
  int64_t next_step_ = 0;
  bool closed_ = false;
  std::vector<std::weak_ptr<StepState>> live_;
};

}  // namespace

Result<KernelCache::Entry> KernelCache::get(const Node& node, DeviceId device) {
  std::lock_guard<std::mutex> lock(mu_);
  auto key = std::make_tuple(node.id, node.op, device.type == DeviceType::GPU ? device.index : -1);
  auto it = entries_.find(key);
  if (it != entries_.end()) return it->second;
  AF_ASSIGN_OR_RETURN(std::unique_ptr<OpKernel> k, KernelRegistry::global().create(node, device.type));
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
