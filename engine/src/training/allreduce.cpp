// All-reduce training in the graph (actorflow/collective.h): gradients in buckets, one
// CollectiveAllReduce node each, the optimizer's apply ops reading the buckets' outputs.
#include "actorflow/collective.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "actorflow/distributed.h"
#include "actorflow/dsl.h"
#include "actorflow/gradients.h"
#include "dsl/dsl_build.h"

namespace actorflow::train {

namespace {
constexpr const char* kBucketsCollection = "allreduce_buckets";
}

Operation allreduce_minimize(optim::Optimizer& opt, const Output& loss, const Output& global_step,
                             const AllReduceOptions& options, const std::vector<Output>& var_list) {
  return allreduce_minimize(std::vector<OptimizerVars>{{&opt, var_list}}, loss, global_step, options);
}

Operation allreduce_minimize(const std::vector<OptimizerVars>& parts, const Output& loss, const Output& global_step,
                             const AllReduceOptions& options) {
  Graph& g = *loss.graph();
  if (parts.empty()) throw Error(invalid_argument("allreduce_minimize: no optimizer"));
  struct Item {
    Output grad, var;
    size_t part = 0, index = 0;  // where its (grad, var) goes back
  };
  std::vector<optim::GradsAndVars> grads(parts.size());
  std::vector<Item> items;
  for (size_t p = 0; p < parts.size(); ++p) {
    if (!parts[p].optimizer) throw Error(invalid_argument("allreduce_minimize: a part has no optimizer"));
    grads[p] = parts[p].optimizer->compute_gradients(loss, parts[p].var_list);
    for (size_t i = 0; i < grads[p].size(); ++i) {
      const auto& [gr, v] = grads[p][i];
      if (gr.valid()) items.push_back({gr.sparse() ? densify(gr, v) : gr.dense, v, p, i});
    }
  }
  if (items.empty()) throw Error(invalid_argument("allreduce_minimize: no gradients for any variable"));
  // The backward pass produces the last layer's gradients first: buckets are filled in
  // that order, so the first bucket's all-reduce runs while earlier layers' gradients
  // are still being computed. A bucket closes before a gradient that would take it past
  // bucket_bytes (PyTorch DDP's rule) or that has another dtype.
  std::vector<std::vector<const Item*>> buckets;
  int64_t filled = 0;
  for (auto it = items.rbegin(); it != items.rend(); ++it) {
    int64_t bytes = std::max<int64_t>(0, it->var.shape().num_elements()) * static_cast<int64_t>(dtype_size(it->var.dtype()));
    bool fits = !buckets.empty() && filled + bytes <= options.bucket_bytes &&
                buckets.back().front()->grad.dtype() == it->grad.dtype();
    if (!fits) {
      buckets.emplace_back();
      filled = 0;
    }
    buckets.back().push_back(&*it);
    filled += bytes;
  }
  // Reduced gradients back in each part's order, as a plain minimize() applies them: the
  // same slot names, so checkpoints move between one process, ps and all-reduce training.
  std::vector<std::vector<std::optional<Output>>> reduced(parts.size());
  for (size_t p = 0; p < parts.size(); ++p) reduced[p].resize(grads[p].size());
  {
    NameScope scope(g, "allreduce");
    for (size_t b = 0; b < buckets.size(); ++b) {
      NodeSpec spec;
      spec.op = "CollectiveAllReduce";
      spec.name = "bucket_" + std::to_string(b);
      std::string names;  // the bucket's variables, for traces and tests
      for (const Item* item : buckets[b]) {
        spec.inputs.push_back(item->grad);
        names += (names.empty() ? "" : ",") + item->var.node().name;
      }
      spec.attrs = {{"bucket", static_cast<int64_t>(b)},
                    {"num_buckets", static_cast<int64_t>(buckets.size())},
                    {"average", options.average},
                    {"variables", names}};
      Operation op = dsl::add_op(g, std::move(spec));
      g.add_to_collection(kBucketsCollection, op.node().id);
      for (size_t i = 0; i < buckets[b].size(); ++i)
        reduced[buckets[b][i]->part][buckets[b][i]->index] = op.output(static_cast<int>(i));
    }
  }
  std::vector<optim::GradsAndVars> mine(parts.size());
  for (size_t p = 0; p < parts.size(); ++p)
    for (size_t i = 0; i < grads[p].size(); ++i) {
      if (!reduced[p][i]) continue;
      Gradient mean;
      mean.dense = *reduced[p][i];
      mine[p].emplace_back(mean, grads[p][i].second);
    }
  return apply_gradients(parts, mine, global_step, "");
}

Operation broadcast_variables(Graph& g, const std::vector<Output>& vars) {
  std::vector<Output> list = vars;
  if (list.empty())
    for (int id : g.collection("variables")) list.emplace_back(&g, id);
  if (list.empty()) throw Error(invalid_argument("broadcast_variables: the graph has no variables"));
  NameScope scope(g, "broadcast_variables");
  NodeSpec spec;
  spec.op = "CollectiveBroadcast";
  spec.name = "from_rank_0";
  spec.inputs = list;
  Operation op = dsl::add_op(g, std::move(spec));
  std::vector<Operation> assigns;
  for (size_t i = 0; i < list.size(); ++i) assigns.emplace_back(assign(list[i], op.output(static_cast<int>(i))));
  return group(g, assigns, "assigned");
}

std::vector<std::vector<std::string>> allreduce_buckets(const Graph& g) {
  std::vector<std::vector<std::string>> out;
  for (int id : g.collection(kBucketsCollection)) {
    std::vector<std::string> names;
    std::string all = g.node(id).attr_string("variables"), name;
    for (char ch : all + ",") {
      if (ch != ',') name += ch;
      else if (!name.empty()) names.push_back(std::exchange(name, {}));
    }
    out.push_back(std::move(names));
  }
  return out;
}

}  // namespace actorflow::train
