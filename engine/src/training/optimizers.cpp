// The Optimizer base (gradients, slots, hyperparameters, grouping, the global step) and
// the update specs of each optimizer. Decay and clipping are in optimizer_schedules.cpp.
#include "actorflow/optimizers.h"

#include <map>
#include <optional>

#include <algorithm>

#include "actorflow/dsl_array.h"
#include "actorflow/dsl_core.h"
#include "actorflow/dsl_math.h"
#include "dsl/dsl_build.h"

namespace actorflow {
namespace optim {

namespace {

std::vector<Output> trainable_variables(Graph& g) {
  std::vector<Output> vars;
  for (int id : g.collection("trainable_variables")) vars.emplace_back(&g, id, 0);
  return vars;
}

// A scalar of `dtype` from a Hyper; a tensor is checked and cast as needed.
Output hyper_as(Graph& g, const Hyper& h, DType dtype, const std::string& name) {
  if (!h.is_tensor()) return scalar_like(g, dtype, h.value(), name);
  const Output& t = h.tensor();
  if (t.graph() != &g) throw Error(invalid_argument("hyperparameter '" + name + "' is a tensor of another graph"));
  if (t.shape().has_rank() && t.shape().rank() != 0)
    throw Error(invalid_argument("hyperparameter '" + name + "' must be a scalar, got '" + t.node().name + "' of shape " +
                                 t.shape().to_string()));
  return t.dtype() == dtype ? t : cast(t, dtype, name);
}

}  // namespace

// ---- the base ----

Output Optimizer::hyper(Graph& g, const std::string& key, DType dtype) {
  auto it = hyper_nodes_.find({key, dtype});
  if (it != hyper_nodes_.end()) return it->second;
  auto h = hypers_.find(key);
  if (h == hypers_.end()) throw Error(internal_error(name_ + ": no hyperparameter '" + key + "'"));
  Output out = hyper_as(g, h->second, dtype, key);
  hyper_nodes_[{key, dtype}] = out;
  return out;
}

Output Optimizer::find_variable(Graph& g, const std::string& name) {
  const Node* n = name.empty() ? nullptr : g.find_node(name);
  return n && n->op == "VariableV2" ? Output(&g, n->id, 0) : Output();
}

Output Optimizer::make_variable(Graph& g, const std::string& name, double init, const Shape& shape, DType dtype) {
  // Slots belong beside their variable: strip the part of the scope the name already has.
  const std::string scope = g.current_name_scope();
  std::string rel = name.compare(0, scope.size(), scope) == 0 ? name.substr(scope.size()) : name;
  const int first = g.num_nodes();
  Output v = variable(g, shape, constant_initializer(init, dtype), rel, /*trainable=*/false);
  // As TF's init_scope: the initializer must not wait on the user's control dependencies
  // (minimize() is often called under the update ops of batch norm).
  for (int id = first; id < g.num_nodes(); ++id) g.mutable_node(id).control_inputs.clear();
  return v;
}

Output Optimizer::get_slot(const Output& var, const std::string& slot) const {
  if (!var.valid()) return Output();
  auto it = slot_vars_.find(var.node().name);
  if (it == slot_vars_.end()) return Output();
  auto s = it->second.find(slot);
  return s == it->second.end() ? Output() : find_variable(*var.graph(), s->second);
}

std::vector<std::string> Optimizer::slot_names() const {
  std::vector<std::string> v;
  for (auto& s : slots_) v.push_back(s.key);
  return v;
}

GradsAndVars Optimizer::compute_gradients(const Output& loss, const std::vector<Output>& var_list) {
  if (!loss.valid()) throw Error(invalid_argument(name_ + ": the loss is an empty Output"));
  Graph& g = *loss.graph();
  std::vector<Output> vars = var_list.empty() ? trainable_variables(g) : var_list;
  if (vars.empty()) throw Error(invalid_argument(name_ + ": no variables to optimize"));
  for (auto& v : vars) dsl::require_variable(v, name_, "each of var_list");
  if (!is_floating(loss.dtype()))
    throw Error(invalid_argument(name_ + ": the loss '" + loss.node().name + "' must be float32 or float64, got " +
                                 dtype_name(loss.dtype())));
  std::vector<Gradient> grads = gradients_sparse({loss}, vars);
  GradsAndVars out;
  for (size_t i = 0; i < vars.size(); ++i) out.emplace_back(grads[i], vars[i]);
  return out;
}

Operation Optimizer::apply_gradients(const GradsAndVars& grads_and_vars, const Output& global_step,
                                     const std::string& name) {
  std::vector<std::pair<Gradient, Output>> todo;
  std::string missing;
  for (auto& [gr, v] : grads_and_vars) {
    dsl::require_variable(v, name_, "each gradient's variable");
    if (gr.valid()) todo.emplace_back(gr, v);
    else missing += (missing.empty() ? "" : ", ") + v.node().name;
  }
  if (todo.empty())
    throw Error(invalid_argument(name_ + ": no gradients for any variable (" + missing +
                                 "); check that the loss depends on them"));
  Graph& g = *todo[0].second.graph();
  // A sparse gradient computed on another task than its variable's (a worker's, for a
  // variable on a ps) is summed by row where it is computed, so the wire carries each row
  // a batch touched once.
  for (auto& [gr, v] : todo)
    if (gr.sparse() && v.shape().has_rank() && v.shape().rank() >= 1 && gr.values.node().device != v.node().device)
      gr = sum_duplicate_rows(gr, std::vector<int64_t>(v.shape().dims().begin() + 1, v.shape().dims().end()));
  if (global_step.valid()) {
    dsl::require_variable(global_step, name_, "global_step");
    if (!is_integer(global_step.dtype()))
      throw Error(invalid_argument(name_ + ": global_step must be an integer variable"));
  }
  // Hyperparameter nodes are made afresh for each call (cheap constants); slots are
  // found again by name, so a second minimize() on the same variables shares them.
  hyper_nodes_.clear();
  std::vector<Output> vars;
  for (auto& [gr, v] : todo) {
    vars.push_back(v);
    // Slots live beside their variable (TF's colocate_with(primary)).
    std::optional<DeviceScope> on_var;
    if (!v.node().device.empty()) on_var.emplace(g, v.node().device);
    auto& mine = slot_vars_[v.node().name];
    for (size_t i = 0; i < slots_.size(); ++i) {
      Output have = find_variable(g, mine[slots_[i].key]);
      if (have.valid() && have.dtype() == v.dtype() && have.shape() == v.shape()) continue;
      std::string slot_name = v.node().name + "/" + name_ + (i == 0 ? "" : "_" + std::to_string(i));
      mine[slots_[i].key] = make_variable(g, slot_name, slots_[i].init, v.shape(), v.dtype()).node().name;
    }
  }
  {
    // Optimizer-wide state (Adam's beta powers) beside the first variable, as TF does.
    std::optional<DeviceScope> on_first;
    if (!vars[0].node().device.empty()) on_first.emplace(g, vars[0].node().device);
    prepare(g, vars);
  }

  // Every node that reads a variable on the way to these gradients runs before that
  // variable's update: then the update finds no reader holding the buffer and works in
  // place instead of copying the variable (the readers' snapshot semantics stay intact).
  std::vector<int> grad_nodes;
  for (auto& [gr, v] : todo) {
    if (gr.dense.valid()) grad_nodes.push_back(gr.dense.node_id());
    if (gr.values.valid()) grad_nodes.push_back(gr.values.node_id());
    if (gr.indices.valid()) grad_nodes.push_back(gr.indices.node_id());
  }
  std::vector<char> on_path(static_cast<size_t>(g.num_nodes()), 0);
  for (int id : g.prune(grad_nodes)) on_path[static_cast<size_t>(id)] = 1;
  std::map<int, std::vector<int>> readers;
  for (int id = 0; id < static_cast<int>(on_path.size()); ++id) {
    if (!on_path[static_cast<size_t>(id)]) continue;
    for (auto& e : g.node(id).inputs)
      if (g.node(e.node).op == "VariableV2") readers[e.node].push_back(id);
  }

  const std::string op_name = name.empty() ? name_ : name;
  std::vector<Operation> updates;
  {
    NameScope scope(g, op_name);
    for (auto& [gr, v] : todo) {
      NameScope per_var(g, "update_" + v.node().name);
      std::optional<DeviceScope> on_var;
      if (!v.node().device.empty()) on_var.emplace(g, v.node().device);
      ApplySpec spec = apply_spec(g, v);
      NodeSpec node;
      node.name = spec.op;
      node.attrs = std::move(spec.attrs);
      node.attrs["variable"] = v.node().name;
      auto& mine = slot_vars_[v.node().name];
      for (auto& s : slots_) node.attrs[s.key] = mine[s.key];
      node.inputs = std::move(spec.before_grad);
      if (!gr.sparse()) {
        node.op = spec.op;
        node.inputs.push_back(gr.dense);
      } else {
        // gather() may have taken indices of any rank: flatten to k rows.
        std::vector<int64_t> rows = v.shape().dims();
        if (rows.empty()) throw Error(invalid_argument(name_ + ": a sparse gradient for scalar variable '" + v.node().name + "'"));
        rows[0] = -1;
        node.op = "Sparse" + spec.op;
        node.name = node.op;
        node.inputs.push_back(reshape(gr.values, Shape(rows), "values"));
        node.inputs.push_back(reshape(gr.indices, Shape{-1}, "indices"));
      }
      for (auto& o : spec.after_grad) node.inputs.push_back(o);
      // Reads of the variable earlier in the step see the value before this update.
      node.control_inputs.push_back(Operation(v));
      for (int r : readers[v.node_id()]) node.control_inputs.push_back(Operation(&g, r));
      updates.push_back(dsl::add_op(g, std::move(node)));
    }
    updates = finish(g, updates);
  }
  if (!global_step.valid()) return group(g, updates, op_name);
  ControlDependencies deps(g, updates);
  return Operation(assign_add(global_step, scalar_like(g, global_step.dtype(), 1, op_name + "/one"), op_name));
}

Operation Optimizer::minimize(const Output& loss, const std::vector<Output>& var_list, const Output& global_step,
                              const std::string& name) {
  return apply_gradients(compute_gradients(loss, var_list), global_step, name);
}

// ---- the optimizers ----

GradientDescent::GradientDescent(Hyper lr, std::string name) : Optimizer(std::move(name)) {
  set_hyper("learning_rate", std::move(lr));
}
Optimizer::ApplySpec GradientDescent::apply_spec(Graph& g, const Output& var) {
  return {"ApplyGradientDescent", {hyper(g, "learning_rate", var.dtype())}, {}, {}};
}

Momentum::Momentum(Hyper lr, Hyper momentum, bool use_nesterov, std::string name)
    : Optimizer(std::move(name)), nesterov_(use_nesterov) {
  set_hyper("learning_rate", std::move(lr));
  set_hyper("momentum", std::move(momentum));
  add_slot("accum", 0.0);
}
Optimizer::ApplySpec Momentum::apply_spec(Graph& g, const Output& var) {
  DType t = var.dtype();
  return {"ApplyMomentum", {hyper(g, "learning_rate", t)}, {hyper(g, "momentum", t)}, {{"use_nesterov", nesterov_}}};
}

Adagrad::Adagrad(Hyper lr, double initial_accumulator, std::string name) : Optimizer(std::move(name)) {
  if (!(initial_accumulator > 0))
    throw Error(invalid_argument("Adagrad: initial_accumulator must be positive, got " + std::to_string(initial_accumulator)));
  set_hyper("learning_rate", std::move(lr));
  add_slot("accum", initial_accumulator);
}
Optimizer::ApplySpec Adagrad::apply_spec(Graph& g, const Output& var) {
  return {"ApplyAdagrad", {hyper(g, "learning_rate", var.dtype())}, {}, {}};
}

Adadelta::Adadelta(Hyper lr, Hyper rho, Hyper epsilon, std::string name) : Optimizer(std::move(name)) {
  set_hyper("learning_rate", std::move(lr));
  set_hyper("rho", std::move(rho));
  set_hyper("epsilon", std::move(epsilon));
  add_slot("accum", 0.0);
  add_slot("accum_update", 0.0);
}
Optimizer::ApplySpec Adadelta::apply_spec(Graph& g, const Output& var) {
  DType t = var.dtype();
  return {"ApplyAdadelta", {hyper(g, "learning_rate", t), hyper(g, "rho", t), hyper(g, "epsilon", t)}, {}, {}};
}

RMSProp::RMSProp(Hyper lr, Hyper decay, Hyper momentum, Hyper epsilon, std::string name) : Optimizer(std::move(name)) {
  set_hyper("learning_rate", std::move(lr));
  set_hyper("decay", std::move(decay));
  set_hyper("momentum", std::move(momentum));
  set_hyper("epsilon", std::move(epsilon));
  add_slot("ms", 1.0);
  add_slot("mom", 0.0);
}
Optimizer::ApplySpec RMSProp::apply_spec(Graph& g, const Output& var) {
  DType t = var.dtype();
  return {"ApplyRMSProp",
          {hyper(g, "learning_rate", t), hyper(g, "decay", t), hyper(g, "momentum", t), hyper(g, "epsilon", t)},
          {},
          {}};
}

Adam::Adam(Hyper lr, double beta1, double beta2, Hyper epsilon, bool use_nesterov, std::string name)
    : Optimizer(std::move(name)), beta1_(beta1), beta2_(beta2), nesterov_(use_nesterov) {
  if (!(beta1 >= 0 && beta1 < 1) || !(beta2 >= 0 && beta2 < 1))
    throw Error(invalid_argument("Adam: beta1 and beta2 must be in [0, 1), got " + std::to_string(beta1) + " and " +
                                 std::to_string(beta2)));
  set_hyper("learning_rate", std::move(lr));
  set_hyper("beta1", beta1);
  set_hyper("beta2", beta2);
  set_hyper("epsilon", std::move(epsilon));
  add_slot("m", 0.0);
  add_slot("v", 0.0);
}

void Adam::prepare(Graph& g, const std::vector<Output>& vars) {
  beta1_power_ = find_variable(g, beta1_name_);
  beta2_power_ = find_variable(g, beta2_name_);
  if (beta1_power_.valid() && beta2_power_.valid()) return;
  // One pair per optimizer, in the first variable's dtype (others get a cast).
  DType t = vars[0].dtype();
  beta1_power_ = make_variable(g, "beta1_power", beta1_, Shape{}, t);
  beta2_power_ = make_variable(g, "beta2_power", beta2_, Shape{}, t);
  beta1_name_ = beta1_power_.node().name;
  beta2_name_ = beta2_power_.node().name;
}

Optimizer::ApplySpec Adam::apply_spec(Graph& g, const Output& var) {
  DType t = var.dtype();
  Output p1 = beta1_power_.dtype() == t ? beta1_power_ : cast(beta1_power_, t);
  Output p2 = beta2_power_.dtype() == t ? beta2_power_ : cast(beta2_power_, t);
  return {"ApplyAdam",
          {p1, p2, hyper(g, "learning_rate", t), hyper(g, "beta1", t), hyper(g, "beta2", t), hyper(g, "epsilon", t)},
          {},
          {{"use_nesterov", nesterov_}}};
}

std::vector<Operation> Adam::finish(Graph& g, const std::vector<Operation>& updates) {
  ControlDependencies deps(g, updates);
  DType t = beta1_power_.dtype();
  Output b1 = assign(beta1_power_, read_variable(beta1_power_) * hyper(g, "beta1", t), "update_beta1_power");
  Output b2 = assign(beta2_power_, read_variable(beta2_power_) * hyper(g, "beta2", t), "update_beta2_power");
  std::vector<Operation> all = updates;
  all.emplace_back(b1);
  all.emplace_back(b2);
  return all;
}

Ftrl::Ftrl(Hyper lr, Hyper l1, Hyper l2, Hyper lr_power, double initial_accumulator, std::string name)
    : Optimizer(std::move(name)) {
  if (!(initial_accumulator >= 0))
    throw Error(invalid_argument("Ftrl: initial_accumulator must be >= 0, got " + std::to_string(initial_accumulator)));
  set_hyper("learning_rate", std::move(lr));
  set_hyper("l1", std::move(l1));
  set_hyper("l2", std::move(l2));
  set_hyper("lr_power", std::move(lr_power));
  add_slot("accum", initial_accumulator);
  add_slot("linear", 0.0);
}
Optimizer::ApplySpec Ftrl::apply_spec(Graph& g, const Output& var) {
  DType t = var.dtype();
  return {"ApplyFtrl", {}, {hyper(g, "learning_rate", t), hyper(g, "l1", t), hyper(g, "l2", t), hyper(g, "lr_power", t)}, {}};
}

}  // namespace optim
}  // namespace actorflow
