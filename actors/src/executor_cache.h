// The one executor manager: the prepared executors of one graph, one per kind of step
// (its feeds, fetches and targets), for a local session and for a partition of a cluster
// session alike. An executor is built on first use (the step's plan, the graph passes,
// GPU placement where a GPU exists), the least recently used idle one goes past the
// session's max_cached_plans, and a broken one (an actor died) is replaced.
#pragma once
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "actorflow/session.h"
#include "executor.h"

namespace actorflow::runtime {

// The environment every executor of a session or partition shares, from its options.
ExecutorEnv make_executor_env(const SessionOptions& opts, DeviceContext* device, ResourceMgr* resources,
                              KernelCache* kernels);

class ExecutorCache {
 public:
  ExecutorCache(const Graph& g, const SessionOptions& opts, const ExecutorEnv& env) : graph_(g), opts_(opts), env_(env) {}
  ~ExecutorCache() { shutdown(); }

  // The executor of `req`'s kind of step.
  Result<std::shared_ptr<Executor>> get(const RunRequest& req);
  // Stops every executor; get() fails afterwards.
  void shutdown();

 private:
  struct Cached {
    std::string key;
    std::shared_ptr<Executor> executor;
  };
  void evict_idle(std::vector<std::shared_ptr<Executor>>& retired);

  const Graph& graph_;
  const SessionOptions& opts_;
  const ExecutorEnv& env_;
  std::mutex mu_;
  std::list<Cached> lru_;  // most recently used first
  std::map<std::string, std::list<Cached>::iterator> index_;
  std::mutex placement_mu_;
  std::set<std::string> placement_logged_;  // soft placement's lines, each printed once
  bool closed_ = false;
};

}  // namespace actorflow::runtime
