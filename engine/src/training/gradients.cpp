#include "actorflow/gradients.h"

#include <algorithm>
#include <optional>
#include <set>

#include "actorflow/dsl_array.h"
#include "actorflow/dsl_core.h"
#include "actorflow/dsl_math.h"
#include "dsl/dsl_build.h"

namespace actorflow {

// ---- registry ----

GradientRegistry& GradientRegistry::global() {
  static GradientRegistry* r = new GradientRegistry();
  return *r;
}

const GradFn* GradientRegistry::find(const std::string& op) const {
  auto it = fns_.find(op);
  return it == fns_.end() ? nullptr : &it->second;
}

std::vector<std::string> GradientRegistry::ops_with_gradients() const {
  std::vector<std::string> v;
  for (auto& [k, f] : fns_) v.push_back(k);
  return v;
}

// ---- helpers built from ops ----

Output sum_to_shape_of(const Output& g, const Output& like, const std::string& name) {
  return dsl::add(dsl::graph_of(g), "SumToShapeOf", name, {g, like});
}

Output densify(const Gradient& g, const Output& like) {
  if (!g.sparse()) return g.dense;
  return dsl::add(dsl::graph_of(g.values), "SparseRowsToDense", "densify", {g.values, g.indices, like});
}

Gradient sum_duplicate_rows(const Gradient& g, const std::vector<int64_t>& row_dims) {
  if (!g.sparse()) return g;
  std::vector<int64_t> rows{-1};
  rows.insert(rows.end(), row_dims.begin(), row_dims.end());
  Graph& graph = dsl::graph_of(g.values);
  Operation op = dsl::add_op(graph, [&] {
    NodeSpec spec;
    spec.op = "SparseSumDuplicates";
    spec.name = "SparseSumDuplicates";
    spec.inputs = {reshape(g.values, Shape(rows), "rows"), reshape(g.indices, Shape{-1}, "row_ids")};
    return spec;
  }());
  return Gradient{{}, op.output(0), op.output(1)};
}

// ---- GradContext ----

GradContext::GradContext(Graph& g, int node, std::vector<Gradient> output_grads)
    : g_(g), node_(node), output_grads_(std::move(output_grads)) {
  input_grads_.resize(g.node(node).inputs.size());
}

Output GradContext::grad(int i) {
  const Gradient& gr = output_grads_[static_cast<size_t>(i)];
  if (!gr.valid()) return Output();
  return densify(gr, output(i));
}

Output GradContext::grad_or_zeros(int i) {
  Output gr = grad(i);
  return gr.valid() ? gr : zeros_like(output(i));
}

void GradContext::set_input_grad(int i, Output g) { input_grads_[static_cast<size_t>(i)] = Gradient{g, {}, {}}; }
void GradContext::set_input_grad(int i, Gradient g) { input_grads_[static_cast<size_t>(i)] = std::move(g); }

Output GradContext::reduce_to_input(const Output& g, int i) {
  Output in = input(i);
  const Shape& si = in.shape();
  const Shape& sg = g.shape();
  if (si.is_fully_defined() && sg.is_fully_defined()) {
    if (si == sg) return g;
    // Static case: sum the leading dims numpy added and the dims that were 1.
    std::vector<int64_t> axes;
    int lead = sg.rank() - si.rank();
    for (int d = 0; d < sg.rank(); ++d)
      if (d < lead || (si.dim(d - lead) == 1 && sg.dim(d) != 1)) axes.push_back(d);
    Output r = axes.empty() ? g : reduce_sum(g, axes, true);
    return reshape(r, si);
  }
  return sum_to_shape_of(g, in);
}

// ---- gradients ----

namespace {

Gradient aggregate(Graph& g, std::vector<Gradient>& parts) {
  if (parts.empty()) return {};
  if (parts.size() == 1) return parts[0];
  bool all_sparse = std::all_of(parts.begin(), parts.end(), [](const Gradient& p) { return p.sparse(); });
  if (all_sparse) {
    std::vector<Output> idx, vals;
    for (auto& p : parts) {
      idx.push_back(p.indices);
      vals.push_back(p.values);
    }
    return Gradient{{}, concat(idx, 0), concat(vals, 0)};
  }
  std::vector<Output> dense;
  const Gradient* first_dense = nullptr;
  for (auto& p : parts)
    if (!p.sparse()) first_dense = &p;
  for (auto& p : parts) dense.push_back(p.sparse() ? densify(p, first_dense->dense) : p.dense);
  return Gradient{add_n(dense), {}, {}};
}

}  // namespace

std::vector<Gradient> gradients_sparse(const std::vector<Output>& ys, const std::vector<Output>& xs,
                                       const std::vector<Output>& grad_ys) {
  if (ys.empty()) throw Error(invalid_argument("gradients: no ys given"));
  Graph& g = *ys[0].graph();
  const int n = g.num_nodes();
  // Nodes on a data path from some x to some y. Node ids follow data edges, so one
  // forward and one backward sweep suffice.
  std::vector<char> from_x(static_cast<size_t>(n), 0), to_y(static_cast<size_t>(n), 0);
  for (auto& x : xs) {
    throw_if_error(g.check_owns(x, "gradients: an x"));
    from_x[static_cast<size_t>(x.node_id())] = 1;
  }
  for (int id = 0; id < n; ++id)
    for (auto& e : g.node(id).inputs)
      if (from_x[static_cast<size_t>(e.node)]) from_x[static_cast<size_t>(id)] = 1;
  for (auto& y : ys) {
    throw_if_error(g.check_owns(y, "gradients: a y"));
    to_y[static_cast<size_t>(y.node_id())] = 1;
  }
  for (int id = n - 1; id >= 0; --id)
    if (to_y[static_cast<size_t>(id)])
      for (auto& e : g.node(id).inputs) to_y[static_cast<size_t>(e.node)] = 1;

  std::map<Endpoint, std::vector<Gradient>> contrib;
  std::map<Endpoint, Gradient> done;
  NameScope scope(g, "gradients");
  for (size_t i = 0; i < ys.size(); ++i) {
    Output gy = i < grad_ys.size() && grad_ys[i].valid() ? grad_ys[i] : ones_like(ys[i], ys[i].node().name + "_ones");
    contrib[ys[i].endpoint()].push_back(Gradient{gy, {}, {}});
  }
  for (int id = n - 1; id >= 0; --id) {
    if (!from_x[static_cast<size_t>(id)] || !to_y[static_cast<size_t>(id)]) continue;
    const Node& node = g.node(id);
    std::vector<Gradient> out_grads(static_cast<size_t>(node.num_outputs()));
    bool any = false;
    for (int o = 0; o < node.num_outputs(); ++o) {
      auto it = contrib.find({id, o});
      if (it == contrib.end()) continue;
      out_grads[static_cast<size_t>(o)] = aggregate(g, it->second);
      done[{id, o}] = out_grads[static_cast<size_t>(o)];
      any = true;
    }
    if (!any || node.op == "StopGradient" || GradientRegistry::global().not_differentiable(node.op)) continue;
    bool needs = false;
    for (auto& e : node.inputs)
      needs = needs || (from_x[static_cast<size_t>(e.node)] && is_floating(g.node(e.node).output_dtypes[static_cast<size_t>(e.index)]));
    if (!needs) continue;
    const GradFn* fn = GradientRegistry::global().find(node.op);
    if (!fn) throw Error(unimplemented("gradients: no gradient is defined for op '" + node.op + "' (node '" + node.name + "')"));
    GradContext ctx(g, id, std::move(out_grads));
    {
      NameScope s(g, node.name + "_grad");
      // A gradient's ops compute in the forward op's compute type (ComputeTypeScope):
      // a bfloat16 product's gradient products are bfloat16 too.
      std::optional<ComputeTypeScope> precision;
      if (const AttrValue* t = node.find_attr("compute_type"); t && t->is<std::string>())
        precision.emplace(g, t->get<std::string>());
      Status st = (*fn)(ctx);
      if (!st.ok()) throw Error(st.with_context("gradient of '" + node.name + "'"));
    }
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      const Gradient& gi = ctx.input_grads()[i];
      const Endpoint& e = node.inputs[i];
      if (!gi.valid() || !from_x[static_cast<size_t>(e.node)]) continue;
      if (!is_floating(g.node(e.node).output_dtypes[static_cast<size_t>(e.index)])) continue;
      contrib[e].push_back(gi);
    }
  }
  std::vector<Gradient> result;
  for (auto& x : xs) {
    auto it = done.find(x.endpoint());
    if (it != done.end()) {
      result.push_back(it->second);
      continue;
    }
    auto c = contrib.find(x.endpoint());
    result.push_back(c == contrib.end() ? Gradient{} : aggregate(g, c->second));
  }
  return result;
}

std::vector<Output> gradients(const std::vector<Output>& ys, const std::vector<Output>& xs,
                              const std::vector<Output>& grad_ys) {
  auto sparse = gradients_sparse(ys, xs, grad_ys);
  std::vector<Output> out;
  for (size_t i = 0; i < xs.size(); ++i) {
    const Gradient& gr = sparse[i];
    if (!gr.valid()) out.push_back(Output());
    else if (gr.sparse()) {
      NameScope s(*xs[i].graph(), "gradients");
      out.push_back(densify(gr, xs[i]));
    } else out.push_back(gr.dense);
  }
  return out;
}

}  // namespace actorflow
