// Streaming-metric state updates: AucAccumulate adds a batch to the confusion counts of
// an ROC curve held in four variables (as tf.metrics.auc's local variables).
#include "actorflow/op_registry.h"
#include "common/shape_fns.h"

namespace actorflow {
namespace {

// The attributes naming the count variables, in output order.
const char* const kCountAttrs[] = {"true_positives", "false_negatives", "true_negatives", "false_positives"};

// Bounds num_thresholds so a fuzzed GraphDef cannot ask for absurd variables.
constexpr int64_t kMaxThresholds = int64_t{1} << 24;

Status auc_accumulate_shape(ShapeContext& c) {
  const AttrValue* nt = c.node().find_attr("num_thresholds");
  if (!nt || !nt->is<int64_t>() || nt->get<int64_t>() < 2 || nt->get<int64_t>() > kMaxThresholds)
    return c.error("attribute 'num_thresholds' must be an integer in [2, " + std::to_string(kMaxThresholds) + "], got " +
                   (nt ? nt->to_string() : std::string("nothing")));
  const int64_t n = nt->get<int64_t>();
  std::vector<std::string> seen;
  for (const char* key : kCountAttrs) {
    const AttrValue* a = c.node().find_attr(key);
    if (!a || !a->is<std::string>()) return c.error(std::string("attribute '") + key + "' must name a variable");
    const Node* var = c.graph().find_node(a->get<std::string>());
    if (!var || var->op != "VariableV2")
      return c.error(std::string("attribute '") + key + "' must name a VariableV2 node, got '" + a->get<std::string>() + "'");
    for (const std::string& s : seen)
      if (s == var->name) return c.error("variable '" + s + "' is named by two count attributes");
    seen.push_back(var->name);
    if (var->output_dtypes[0] != DType::f64 || var->output_shapes[0] != Shape{n})
      return c.error("variable '" + var->name + "' (" + key + ") must be f64[" + std::to_string(n) + "], got " +
                     dtype_name(var->output_dtypes[0]) + var->output_shapes[0].to_string());
  }
  if (!is_floating(c.input_dtype(0))) return c.error("predictions " + c.describe_input(0) + " must be f32 or f64");
  if (!is_numeric(c.input_dtype(1)) && c.input_dtype(1) != DType::boolean)
    return c.error("labels " + c.describe_input(1) + " must be bool or numeric");
  if (!c.input_shape(0).compatible_with(c.input_shape(1)))
    return c.error("predictions " + c.describe_input(0) + " and labels " + c.describe_input(1) +
                   " must have the same shape");
  if (c.num_inputs() == 3) {
    if (!is_floating(c.input_dtype(2))) return c.error("weights " + c.describe_input(2) + " must be f32 or f64");
    if (!c.input_shape(2).is_scalar() && !c.input_shape(2).compatible_with(c.input_shape(0)))
      return c.error("weights " + c.describe_input(2) + " must be a scalar or shaped like predictions " +
                     c.describe_input(0));
  }
  for (int i = 0; i < 4; ++i) c.set_output(i, DType::f64, Shape{n});
  return Status::OK();
}

}  // namespace

// Inputs: predictions in [0, 1], labels (nonzero = positive), optional weights (scalar or
// one per prediction). Outputs: the four count vectors after the update. A prediction p
// counts as positive at threshold i when p > thresholds[i], with thresholds[0] = -1e-7,
// thresholds[i] = i / (num_thresholds - 1), thresholds[num_thresholds - 1] = 1 + 1e-7.
AF_REGISTER_OP("AucAccumulate")
    .inputs(2, 3)
    .outputs(4)
    .stateful()
    .attr("num_thresholds", int64_t{200})
    .required_attr("true_positives")
    .required_attr("false_negatives")
    .required_attr("true_negatives")
    .required_attr("false_positives")
    .shape_fn(auc_accumulate_shape);

}  // namespace actorflow
