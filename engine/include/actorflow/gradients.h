// Automatic differentiation by graph extension: gradients(ys, xs) adds gradient nodes
// (under a "gradients/" name scope) built by the gradient function registered beside
// each differentiable op (AF_REGISTER_GRADIENT in ops/grads/).
#pragma once
#include "actorflow/api.h"
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "actorflow/graph.h"

AF_PUBLIC_BEGIN

namespace actorflow {

// A gradient that may be sparse: the gradient of gather(params, indices) with respect to
// params is `values` at rows `indices` of a tensor of `dense_shape`; optimizers apply it
// row-wise. A dense gradient has only `dense` set.
struct Gradient {
  Output dense;
  Output indices;
  Output values;
  bool sparse() const { return !dense.valid() && values.valid(); }
  bool valid() const { return dense.valid() || values.valid(); }
};

class GradContext {
 public:
  GradContext(Graph& g, int node, std::vector<Gradient> output_grads);
  Graph& graph() { return g_; }
  const Node& node() const { return g_.node(node_); }
  Operation op() { return Operation(&g_, node_); }
  int num_inputs() const { return static_cast<int>(node().inputs.size()); }
  int num_outputs() const { return node().num_outputs(); }
  Output input(int i) { return Output(&g_, node().inputs[static_cast<size_t>(i)].node, node().inputs[static_cast<size_t>(i)].index); }
  Output output(int i) { return Output(&g_, node_, i); }
  // The gradient flowing into output i, made dense; invalid if nothing flows there.
  Output grad(int i);
  // Like grad(i), but zeros shaped like output i when nothing flows there.
  Output grad_or_zeros(int i);
  void set_input_grad(int i, Output g);
  void set_input_grad(int i, Gradient g);
  // g summed over the dims along which input i was broadcast, to input i's shape.
  Output reduce_to_input(const Output& g, int i);
  const std::vector<Gradient>& input_grads() const { return input_grads_; }

 private:
  Graph& g_;
  int node_;
  std::vector<Gradient> output_grads_;
  std::vector<Gradient> input_grads_;
};

using GradFn = std::function<Status(GradContext&)>;

class GradientRegistry {
 public:
  static GradientRegistry& global();
  void add(const std::string& op, GradFn fn) { fns_[op] = std::move(fn); }
  void add_not_differentiable(const std::string& op) { none_[op] = true; }
  const GradFn* find(const std::string& op) const;
  bool not_differentiable(const std::string& op) const { return none_.count(op) != 0; }
  std::vector<std::string> ops_with_gradients() const;

 private:
  std::map<std::string, GradFn> fns_;
  std::map<std::string, bool> none_;
};

struct GradRegistrar {
  GradRegistrar(const std::string& op, GradFn fn) { GradientRegistry::global().add(op, std::move(fn)); }
  explicit GradRegistrar(const std::string& op) { GradientRegistry::global().add_not_differentiable(op); }
};

// d(sum of ys · grad_ys)/d xs. grad_ys defaults to ones. An x that no y depends on gets
// an invalid Output. Throws af::Error if a needed op has no gradient.
std::vector<Output> gradients(const std::vector<Output>& ys, const std::vector<Output>& xs,
                              const std::vector<Output>& grad_ys = {});
// The same, keeping sparse gradients sparse (for optimizers).
std::vector<Gradient> gradients_sparse(const std::vector<Output>& ys, const std::vector<Output>& xs,
                                       const std::vector<Output>& grad_ys = {});

// Sums `g` to the runtime shape of `like` (the reverse of numpy broadcasting).
Output sum_to_shape_of(const Output& g, const Output& like, const std::string& name = "SumToShapeOf");
// Dense form of a sparse gradient: rows `values` scattered-added at `indices` into zeros
// shaped like `like`.
Output densify(const Gradient& g, const Output& like);
// A sparse gradient with each row index once, its values summed (TF's
// _deduplicate_indexed_slices), indices int64 and values [u, ...row] in first-seen order;
// built where the gradient is computed, so that a worker sends a row it touched several
// times in a batch once. A dense gradient comes back as it is.
Gradient sum_duplicate_rows(const Gradient& g, const std::vector<int64_t>& row_dims);

}  // namespace actorflow

#define AF_REGISTER_GRADIENT(op, fn) \
  static ::actorflow::GradRegistrar AF_CONCAT(af_grad_registrar_, __COUNTER__)(op, fn)
#define AF_NO_GRADIENT(op) \
  static ::actorflow::GradRegistrar AF_CONCAT(af_grad_registrar_, __COUNTER__)(op)

AF_PUBLIC_END
