// The runtime's half of GPU placement: a plan whose nodes ask for a GPU gets
// each node's device from soft placement (actorflow/ops/gpu_placement.h) and a copy node
// on every edge that crosses devices. Plans without such nodes are left alone, and CUDA
// is never asked anything for them.
#pragma once
#include <mutex>
#include <set>
#include <string>

#include "graph_passes.h"

namespace actorflow::runtime {

struct GpuPlanOptions {
  int num_gpus = -1;  // -1: ask CUDA (tests pretend)
  // Fallback lines already printed (one per node per session); null: print none.
  std::set<std::string>* logged = nullptr;
  std::mutex* logged_mu = nullptr;
};

// True when some node of the graph names a GPU device (a cheap scan; no CUDA call).
bool graph_asks_for_gpu(const Graph& g);

// Places the plan's nodes over the whole graph's placement (so every plan of a session
// agrees where a variable lives), then:
//  - an edge from a host node into a GPU node gets a _CopyToDevice, an edge from a GPU
//    node into a host node (or into a GPU kernel's host-memory input) a _CopyToHost;
//    one copy per produced value and destination, shared by its consumers there;
//  - feeds into GPU nodes arrive through their _CopyToDevice; fetches of GPU values are
//    answered by a _CopyToHost.
// Copy nodes run on the GPU side of their edge (the copy streams, ordered by events).
// A rewritten node whose op has no GPU kernel (a constant-folded value) stays on the CPU.
Status place_plan_on_gpus(const Graph& g, OptimizedPlan& p, const GpuPlanOptions& opts);

}  // namespace actorflow::runtime
