// Optimizer updates, as TF's training_ops: Apply<Rule> updates a variable (and its slot
// variables) in place from a dense gradient; SparseApply<Rule> takes (values [k, ...],
// indices [k]) instead and touches only those rows. Variables are named by attributes
// ("variable" plus one per slot), the way Assign names its variable; the output is the
// variable's new value.
#include <string>
#include <vector>

#include "actorflow/op_registry.h"
#include "common/shape_fns.h"

namespace actorflow {
namespace {

// One op's input layout: every input is a scalar hyperparameter except the gradient at
// `grad` (and, for the sparse form, the indices right after it).
struct ApplyLayout {
  std::vector<std::string> slots;
  int num_inputs;  // of the dense form
  int grad;
};

Status check_variable_attr(ShapeContext& c, const std::string& attr, const Node** out) {
  std::string name = c.node().attr_string(attr);
  const Node* n = c.graph().find_node(name);
  if (!n || n->op != "VariableV2" || n->num_outputs() < 1)
    return c.error("attribute '" + attr + "' must name a VariableV2 node, got '" + name + "'");
  *out = n;
  return Status::OK();
}

Status apply_shape(ShapeContext& c, const ApplyLayout& l, bool sparse) {
  const Node* var = nullptr;
  AF_RETURN_IF_ERROR(check_variable_attr(c, "variable", &var));
  const DType dtype = var->output_dtypes[0];
  const Shape& vshape = var->output_shapes[0];
  if (!is_floating(dtype))
    return c.error("variable '" + var->name + "' is " + dtype_name(dtype) + "; optimizers update float32/float64 variables");
  std::vector<std::string> seen{var->name};
  for (const std::string& slot : l.slots) {
    const Node* s = nullptr;
    AF_RETURN_IF_ERROR(check_variable_attr(c, slot, &s));
    for (const std::string& other : seen)
      if (other == s->name) return c.error("attribute '" + slot + "' names '" + s->name + "', which another attribute names too");
    seen.push_back(s->name);
    if (s->output_dtypes[0] != dtype || !s->output_shapes[0].compatible_with(vshape))
      return c.error("slot '" + s->name + "' (" + dtype_name(s->output_dtypes[0]) + s->output_shapes[0].to_string() +
                     ") does not match variable '" + var->name + "' (" + dtype_name(dtype) + vshape.to_string() + ")");
  }
  const int grad = l.grad;
  const int indices = sparse ? grad + 1 : -1;
  for (int i = 0; i < c.num_inputs(); ++i) {
    if (i == indices) continue;
    if (c.input_dtype(i) != dtype)
      return c.error("input " + c.describe_input(i) + " must be " + dtype_name(dtype) + " like variable '" + var->name + "'");
    if (i != grad && c.input_shape(i).has_rank() && c.input_shape(i).rank() != 0)
      return c.error("hyperparameter " + c.describe_input(i) + " must be a scalar");
  }
  const Shape& g = c.input_shape(grad);
  if (!sparse) {
    if (!g.compatible_with(vshape))
      return c.error("gradient " + c.describe_input(grad) + " does not match variable '" + var->name + "' of shape " +
                     vshape.to_string());
  } else {
    AF_RETURN_IF_ERROR(shape_fns::require_dtype(c, indices, {DType::i32, DType::i64}));
    if (vshape.rank() < 1) return c.error("a sparse update needs a variable of rank >= 1; '" + var->name + "' is a scalar");
    const Shape& ix = c.input_shape(indices);
    if (ix.has_rank() && ix.rank() != 1) return c.error("indices " + c.describe_input(indices) + " must be a vector");
    if (g.has_rank()) {
      bool ok = g.rank() == vshape.rank();
      for (int d = 1; ok && d < g.rank(); ++d) ok = g.dim(d) < 0 || g.dim(d) == vshape.dim(d);
      if (ok && ix.has_rank() && g.rank() >= 1 && g.dim(0) >= 0 && ix.dim(0) >= 0) ok = g.dim(0) == ix.dim(0);
      if (!ok) {
        std::vector<int64_t> want = vshape.dims();
        want[0] = Shape::kUnknown;
        return c.error("values " + c.describe_input(grad) + " must have shape " + Shape(want).to_string() +
                       " (k rows of variable '" + var->name + "' " + vshape.to_string() + ") to match indices " +
                       c.describe_input(indices));
      }
    }
  }
  c.set_output(0, dtype, vshape);
  return Status::OK();
}

void register_apply(const std::string& name, ApplyLayout l, std::map<std::string, AttrValue> extra = {}) {
  for (bool sparse : {false, true}) {
    OpDefBuilder b(sparse ? "Sparse" + name : name);
    b.inputs(sparse ? l.num_inputs + 1 : l.num_inputs).stateful().required_attr("variable");
    for (auto& s : l.slots) b.required_attr(s);
    for (auto& [k, v] : extra) b.attr(k, v);
    b.shape_fn([l, sparse](ShapeContext& c) { return apply_shape(c, l, sparse); });
    OpRegistrar reg(b);
  }
}

// Registered from a static initializer, like AF_REGISTER_OP, for both forms at once.
const bool registered = [] {
  // ApplyGradientDescent(alpha, delta)
  register_apply("ApplyGradientDescent", {{}, 2, 1});
  // ApplyMomentum(lr, grad, momentum)
  register_apply("ApplyMomentum", {{"accum"}, 3, 1}, {{"use_nesterov", false}});
  // ApplyAdagrad(lr, grad)
  register_apply("ApplyAdagrad", {{"accum"}, 2, 1});
  // ApplyAdadelta(lr, rho, epsilon, grad)
  register_apply("ApplyAdadelta", {{"accum", "accum_update"}, 4, 3});
  // ApplyRMSProp(lr, rho, momentum, epsilon, grad)
  register_apply("ApplyRMSProp", {{"ms", "mom"}, 5, 4});
  // ApplyAdam(beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad)
  register_apply("ApplyAdam", {{"m", "v"}, 7, 6}, {{"use_nesterov", false}});
  // ApplyFtrl(grad, lr, l1, l2, lr_power)
  register_apply("ApplyFtrl", {{"accum", "linear"}, 5, 0});
  return true;
}();

}  // namespace
}  // namespace actorflow
