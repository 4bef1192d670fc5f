// Plan-time graph optimization, as TensorFlow's Grappler: run once when a kind of step is
// prepared, on the plan's nodes only, never on the user's Graph. Rewritten nodes are
// copies owned by the result; untouched nodes are the graph's own.
#pragma once
#include <map>
#include <memory>
#include <unordered_set>

#include "actorflow/runtime/step_plan.h"

namespace actorflow::runtime {

struct PassStats {
  int folded = 0;        // nodes replaced by their value (constant folding)
  int deduplicated = 0;  // nodes merged into an identical earlier node (CSE)
  int pruned = 0;        // nodes no fetch or target needs any more
  int fused = 0;         // _FusedMatMul, _FusedConv2D and _FusedMaxPoolGrad nodes written (each replaces 2 or 3 nodes)
  int fused_elementwise = 0;          // _FusedElementwise nodes written
  int elementwise_nodes_replaced = 0;  // the nodes they replace (2 or more each)
};

// The nodes one executor runs.
class OptimizedPlan {
 public:
  OptimizedPlan(const Graph& g, StepPlan plan) : graph_(&g), plan_(std::move(plan)) {}
  const StepPlan& plan() const { return plan_; }
  StepPlan& mutable_plan() { return plan_; }
  // The node as the executor runs it: a rewritten copy, or the graph's node.
  const Node& node(int id) const {
    auto it = rewritten_.find(id);
    return it != rewritten_.end() ? *it->second : graph_->node(id);
  }
  // A private copy of node `id` to rewrite (made on first use).
  Node& rewrite(int id);
  const PassStats& stats() const { return stats_; }
  PassStats& mutable_stats() { return stats_; }

  // Nodes the plan adds (the copies of gpu_plan.h): ids above any graph node's.
  static constexpr int kFirstAddedId = 1 << 30;
  int add_node(Node n) {
    const int id = kFirstAddedId + static_cast<int>(added_++);
    n.id = id;
    rewritten_[id] = std::make_unique<Node>(std::move(n));
    return id;
  }
  // Where a node runs: the CPU unless a GPU placement said otherwise.
  DeviceId device(int id) const {
    auto it = devices_.find(id);
    return it != devices_.end() ? it->second : DeviceId{};
  }
  void set_device(int id, DeviceId d) {
    if (d.type == DeviceType::GPU) uses_gpu_ = true;
    devices_[id] = d;
  }
  bool uses_gpu() const { return uses_gpu_; }

 private:
  const Graph* graph_;
  StepPlan plan_;
  std::map<int, std::unique_ptr<Node>> rewritten_;
  PassStats stats_;
  size_t added_ = 0;
  std::map<int, DeviceId> devices_;
  bool uses_gpu_ = false;
};

// Folds nodes whose inputs are all constants into Const nodes (evaluating their CPU
// kernels now), merges identical stateless nodes, fuses MatMul -> BiasAdd (-> Relu)
// chains into _FusedMatMul nodes (Conv2D's into _FusedConv2D), a pooled Relu's gradient
// into the max-pool gradient (_FusedMaxPoolGrad) and chains of elementwise ops into
// _FusedElementwise nodes, then drops nodes nothing needs.
Result<std::shared_ptr<OptimizedPlan>> optimize_plan(const Graph& g, StepPlan plan, const GraphOptimizerOptions& opts);

// The nodes a pass must leave running as themselves: fetched, fed or run as a target.
std::unordered_set<int> pinned_nodes(const StepPlan& plan);

}  // namespace actorflow::runtime
