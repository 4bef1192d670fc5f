// Sources, variables and plumbing: Placeholder, Const, VariableV2, Assign*, Identity,
// StopGradient, NoOp, and the questions IsVariableInitialized and ReportUninitialized.
#include "actorflow/op_registry.h"
#include "common/shape_fns.h"

namespace actorflow {
namespace {

Status placeholder_shape(ShapeContext& c) {
  DType t = c.node().attr_dtype("dtype");
  if (t == DType::invalid) return c.error("attribute 'dtype' is missing or not a dtype");
  c.set_output(0, t, c.node().attr_shape("shape"));
  return Status::OK();
}

// The VariableV2 node that attribute "variable" names (ops on a variable name it so).
Status named_variable(ShapeContext& c, const Node** var) {
  std::string var_name = c.node().attr_string("variable");
  *var = c.graph().find_node(var_name);
  if (!*var || (*var)->op != "VariableV2")
    return c.error("attribute 'variable' must name a VariableV2 node, got '" + var_name + "'");
  return Status::OK();
}

Status update_shape(ShapeContext& c) {
  const Node* var = nullptr;
  AF_RETURN_IF_ERROR(named_variable(c, &var));
  const std::string& var_name = var->name;
  if (var->output_dtypes[0] != c.input_dtype(0))
    return c.error("value " + c.describe_input(0) + " does not match variable '" + var_name + "' (" +
                   dtype_name(var->output_dtypes[0]) + var->output_shapes[0].to_string() + ")");
  if (!var->output_shapes[0].compatible_with(c.input_shape(0)) &&
      !(c.node().op != "Assign" && c.input_shape(0).is_scalar()))
    return c.error("value " + c.describe_input(0) + " does not fit variable '" + var_name + "' of shape " +
                   var->output_shapes[0].to_string());
  c.set_output(0, var->output_dtypes[0], var->output_shapes[0]);
  return Status::OK();
}

}  // namespace

AF_REGISTER_OP("Placeholder").inputs(0).required_attr("dtype").attr("shape", Shape::unknown_rank()).shape_fn(placeholder_shape);

AF_REGISTER_OP("PlaceholderWithDefault").inputs(1).attr("shape", Shape::unknown_rank()).shape_fn([](ShapeContext& c) {
  Shape s;
  if (!c.input_shape(0).merge(c.node().attr_shape("shape"), &s))
    return c.error("default " + c.describe_input(0) + " does not match shape " + c.node().attr_shape("shape").to_string());
  c.set_output(0, c.input_dtype(0), c.node().attr_shape("shape").has_rank() ? c.node().attr_shape("shape") : s);
  return Status::OK();
});

AF_REGISTER_OP("Const").inputs(0).required_attr("value").shape_fn([](ShapeContext& c) {
  const Tensor* v = c.node().attr_tensor("value");
  if (!v || !v->valid()) return c.error("attribute 'value' must be a tensor");
  c.set_output(0, v->dtype(), v->shape());
  return Status::OK();
});

AF_REGISTER_OP("VariableV2").inputs(0).stateful().required_attr("dtype").required_attr("shape").shape_fn([](ShapeContext& c) {
  DType t = c.node().attr_dtype("dtype");
  Shape s = c.node().attr_shape("shape");
  if (t == DType::invalid) return c.error("attribute 'dtype' must be a dtype");
  if (!s.is_fully_defined()) return c.error("attribute 'shape' must be fully defined, got " + s.to_string());
  c.set_output(0, t, s);
  return Status::OK();
});

AF_REGISTER_OP("Assign").inputs(1).stateful().required_attr("variable").shape_fn(update_shape);
AF_REGISTER_OP("AssignAdd").inputs(1).stateful().required_attr("variable").shape_fn(update_shape);
AF_REGISTER_OP("AssignSub").inputs(1).stateful().required_attr("variable").shape_fn(update_shape);

AF_REGISTER_OP("ReadVariable").inputs(0).stateful().required_attr("variable").shape_fn([](ShapeContext& c) {
  const Node* var = nullptr;
  AF_RETURN_IF_ERROR(named_variable(c, &var));
  c.set_output(0, var->output_dtypes[0], var->output_shapes[0]);
  return Status::OK();
});

// Whether the variable named by "variable" holds a value (tf.is_variable_initialized); it
// runs where the variable lives, so asking costs a bool on the wire, not the value.
AF_REGISTER_OP("IsVariableInitialized").inputs(0).stateful().required_attr("variable").shape_fn([](ShapeContext& c) {
  const Node* var = nullptr;
  AF_RETURN_IF_ERROR(named_variable(c, &var));
  c.set_output(0, DType::boolean, Shape{});
  return Status::OK();
});

// The names (attribute "names") whose bool input is false, in order: the 1-D string
// tensor of tf.report_uninitialized_variables.
AF_REGISTER_OP("ReportUninitialized").variadic_inputs(1).required_attr("names").shape_fn([](ShapeContext& c) {
  const AttrValue* names = c.node().find_attr("names");
  if (!names || !names->is<AttrValue::Strings>() ||
      names->get<AttrValue::Strings>().size() != static_cast<size_t>(c.num_inputs()))
    return c.error("attribute 'names' must list one name per input (" + std::to_string(c.num_inputs()) + ")");
  for (int i = 0; i < c.num_inputs(); ++i) {
    if (c.input_dtype(i) != DType::boolean || !c.input_shape(i).compatible_with(Shape{}))
      return c.error("input " + c.describe_input(i) + " must be a bool scalar");
  }
  c.set_output(0, DType::string, Shape{-1});
  return Status::OK();
});

AF_REGISTER_OP("Identity").inputs(1).shape_fn(shape_fns::unchanged);
AF_REGISTER_OP("StopGradient").inputs(1).shape_fn(shape_fns::unchanged);
AF_REGISTER_OP("NoOp").inputs(0).outputs(0).shape_fn([](ShapeContext&) { return Status::OK(); });

}  // namespace actorflow
