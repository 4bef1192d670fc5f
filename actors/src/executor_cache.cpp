#include "executor_cache.h"

#include "actorflow/ops/cuda_info.h"
#include "actorflow/runtime/step_plan.h"
#include "gpu_plan.h"
#include "graph_passes.h"

namespace actorflow::runtime {

ExecutorEnv make_executor_env(const SessionOptions& opts, DeviceContext* device, ResourceMgr* resources,
                              KernelCache* kernels) {
  ExecutorEnv env;
  env.device = device;
  env.resources = resources;
  env.kernels = kernels;
  env.edge_capacity = opts.edge_capacity < 1 ? 1 : opts.edge_capacity;
  env.colocate_cheap_ops = opts.optimizer.colocate_cheap_ops;
  env.caller_runs_small_steps = opts.optimizer.caller_runs_small_steps;
  env.encode_all_edges = opts.encode_all_edges;
  env.encode_nodes.insert(opts.encode_edges_of.begin(), opts.encode_edges_of.end());
  return env;
}

Result<std::shared_ptr<Executor>> ExecutorCache::get(const RunRequest& req) {
  std::vector<std::shared_ptr<Executor>> retired;
  std::shared_ptr<Executor> ex;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) return failed_precondition("session is closed");
    std::string key = step_plan_key(graph_, req);
    auto it = index_.find(key);
    if (it != index_.end() && !it->second->executor->health().ok()) {
      retired.push_back(it->second->executor);
      lru_.erase(it->second);
      index_.erase(it);
      it = index_.end();
    }
    if (it == index_.end()) {
      AF_ASSIGN_OR_RETURN(StepPlan plan, make_step_plan(graph_, req));
      AF_RETURN_IF_ERROR(check_kernels(graph_, DeviceType::CPU, plan.nodes));
      GraphOptimizerOptions optimizer = opts_.optimizer;
      // Only where a GPU exists (asking loads nothing on a machine without one): else the
      // graph runs on the CPU exactly as if it named no device.
      const bool gpu = graph_asks_for_gpu(graph_) && cuda_device_count() > 0;
      // Fused elementwise and convolution nodes have no GPU kernel: nodes placed on a GPU
      // stay unfused.
      if (gpu) {
        optimizer.fuse_elementwise = false;
        optimizer.fuse_conv_bias_relu = false;
      }
      AF_ASSIGN_OR_RETURN(std::shared_ptr<OptimizedPlan> optimized, optimize_plan(graph_, std::move(plan), optimizer));
      if (gpu) {
        GpuPlanOptions g;
        g.logged = &placement_logged_;
        g.logged_mu = &placement_mu_;
        AF_RETURN_IF_ERROR(place_plan_on_gpus(graph_, *optimized, g));
      }
      AF_ASSIGN_OR_RETURN(std::unique_ptr<Executor> made, make_actor_executor(std::move(optimized), env_));
      lru_.push_front(Cached{key, std::shared_ptr<Executor>(std::move(made))});
      index_[key] = lru_.begin();
      evict_idle(retired);
    } else {
      lru_.splice(lru_.begin(), lru_, it->second);
    }
    ex = lru_.front().executor;
  }
  for (auto& r : retired) r->shutdown();
  return ex;
}

// Oldest first, skipping executors a run is using (their use count is above ours).
void ExecutorCache::evict_idle(std::vector<std::shared_ptr<Executor>>& retired) {
  size_t cap = static_cast<size_t>(opts_.max_cached_plans < 1 ? 1 : opts_.max_cached_plans);
  for (auto it = std::prev(lru_.end()); lru_.size() > cap && it != lru_.begin();) {
    auto prev = std::prev(it);
    if (it->executor.use_count() == 1) {
      retired.push_back(it->executor);
      index_.erase(it->key);
      lru_.erase(it);
    }
    it = prev;
  }
}

void ExecutorCache::shutdown() {
  std::list<Cached> executors;
  {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
    executors.swap(lru_);
    index_.clear();
  }
  for (auto& c : executors) c.executor->shutdown();
}

}  // namespace actorflow::runtime
