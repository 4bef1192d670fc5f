#include "cheap_ops.h"

#include <string_view>

#include "actorflow/op_registry.h"

namespace actorflow::runtime {
namespace {

// O(1) whatever the tensor: they forward or describe their input.
constexpr std::string_view kMetadataOps[] = {"Identity", "StopGradient", "NoOp", "Shape", "Size", "Rank"};

// Work in proportion to their output (elementwise, or copies and softmax over it).
constexpr std::string_view kElementwiseOps[] = {
    "Add", "Sub", "Mul", "Div", "Pow", "Maximum", "Minimum", "SquaredDifference", "Equal", "NotEqual", "Less",
    "LessEqual", "Greater", "GreaterEqual", "LogicalAnd", "LogicalOr", "LogicalNot", "Neg", "Abs", "Sign",
    "Square", "Relu", "Exp", "Log", "Sqrt", "Rsqrt", "Sigmoid", "Tanh", "Softplus", "Cast", "BiasAdd", "Select",
    "ZerosLike", "OnesLike", "Reshape", "ExpandDims", "Squeeze", "_FusedElementwise", "Softmax", "LogSoftmax",
    "Transpose", "Slice", "Concat", "Pad", "Tile", "OneHot", "Gather", "Split", "SplitV", "Fill"};

template <size_t N>
bool listed(const std::string_view (&ops)[N], const std::string& op) {
  for (std::string_view o : ops)
    if (o == op) return true;
  return false;
}

}  // namespace

bool is_metadata_op(const std::string& op) { return listed(kMetadataOps, op); }

bool is_stateless_sync(const Node& node, OpKernel& kernel) {
  if (kernel.as_async()) return false;
  const OpDef* def = OpRegistry::global().find(node.op);
  return def && !def->stateful;
}

bool is_cheap(const Node& node, OpKernel& kernel) {
  if (!is_stateless_sync(node, kernel)) return false;
  const OpDef* def = OpRegistry::global().find(node.op);
  if (def->expensive) return false;
  if (listed(kMetadataOps, node.op)) return true;
  if (!listed(kElementwiseOps, node.op)) return false;
  for (const Shape& s : node.output_shapes)
    if (!s.is_fully_defined() || s.num_elements() > kCheapElements) return false;
  return true;
}

}  // namespace actorflow::runtime
