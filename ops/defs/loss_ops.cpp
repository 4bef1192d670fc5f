// Dense-layer and loss ops: BiasAdd, BiasAddGrad, L2Loss, the fused softmax
// cross-entropies (loss plus the logits gradient as a second output, as TF) and the
// sigmoid cross-entropy.
#include "actorflow/op_registry.h"
#include "common/shape_fns.h"

namespace actorflow {
namespace {

// data_format of BiasAdd / BiasAddGrad: "NHWC" (channels last) or "NCHW" (channels at
// axis 1). Fuzzed GraphDefs may carry any kind of value here.
Status data_format(const ShapeContext& c, bool* nchw) {
  const AttrValue* a = c.node().find_attr("data_format");
  if (!a) {
    *nchw = false;
    return Status::OK();
  }
  if (!a->is<std::string>() || (a->get<std::string>() != "NHWC" && a->get<std::string>() != "NCHW"))
    return c.error("attribute 'data_format' must be \"NHWC\" or \"NCHW\", got " + a->to_string());
  *nchw = a->get<std::string>() == "NCHW";
  return Status::OK();
}

// The channel axis of a tensor of rank r, or an error if r is too small for the format.
Status channel_axis(const ShapeContext& c, int input, bool nchw, int* axis) {
  const int r = c.input_shape(input).rank();
  if (r < (nchw ? 2 : 1))
    return c.error("input " + c.describe_input(input) + " must have rank >= " + (nchw ? "2 for data_format NCHW" : "1"));
  *axis = nchw ? 1 : r - 1;
  return Status::OK();
}

Status floating_input(ShapeContext& c, int i) {
  if (!is_floating(c.input_dtype(i)))
    return c.error("input " + c.describe_input(i) + " must be f32 or f64");
  return Status::OK();
}

Status bias_add_shape(ShapeContext& c) {
  bool nchw;
  AF_RETURN_IF_ERROR(data_format(c, &nchw));
  if (!is_numeric(c.input_dtype(0))) return c.error("value " + c.describe_input(0) + " must be numeric");
  if (c.input_dtype(1) != c.input_dtype(0))
    return c.error("bias " + c.describe_input(1) + " and value " + c.describe_input(0) + " differ in dtype");
  const Shape& b = c.input_shape(1);
  if (b.has_rank() && b.rank() != 1) return c.error("bias " + c.describe_input(1) + " must be a vector");
  Shape x = c.input_shape(0);
  if (!x.has_rank()) {
    c.set_output(0, c.input_dtype(0), x);
    return Status::OK();
  }
  int axis;
  AF_RETURN_IF_ERROR(channel_axis(c, 0, nchw, &axis));
  const int64_t bc = b.has_rank() ? b.dim(0) : Shape::kUnknown;
  const int64_t xc = x.dim(axis);
  if (bc >= 0 && xc >= 0 && bc != xc)
    return c.error("bias " + c.describe_input(1) + " does not match the " + std::to_string(xc) + " channels of value " +
                   c.describe_input(0) + " (data_format " + (nchw ? "NCHW" : "NHWC") + ")");
  if (xc < 0) x.set_dim(axis, bc);
  c.set_output(0, c.input_dtype(0), x);
  return Status::OK();
}

Status bias_add_grad_shape(ShapeContext& c) {
  bool nchw;
  AF_RETURN_IF_ERROR(data_format(c, &nchw));
  if (!is_numeric(c.input_dtype(0))) return c.error("gradient " + c.describe_input(0) + " must be numeric");
  if (!c.input_shape(0).has_rank()) {
    c.set_output(0, c.input_dtype(0), Shape{Shape::kUnknown});
    return Status::OK();
  }
  int axis;
  AF_RETURN_IF_ERROR(channel_axis(c, 0, nchw, &axis));
  c.set_output(0, c.input_dtype(0), Shape{c.input_shape(0).dim(axis)});
  return Status::OK();
}

// Shape without its last dim; unknown rank stays unknown.
Shape drop_last(const Shape& s) {
  if (!s.has_rank()) return s;
  return Shape(std::vector<int64_t>(s.dims().begin(), s.dims().end() - 1));
}

Status softmax_xent_shape(ShapeContext& c) {
  AF_RETURN_IF_ERROR(floating_input(c, 0));
  if (c.input_dtype(1) != c.input_dtype(0))
    return c.error("logits " + c.describe_input(0) + " and labels " + c.describe_input(1) + " differ in dtype");
  Shape s;
  if (!c.input_shape(0).merge(c.input_shape(1), &s))
    return c.error("logits " + c.describe_input(0) + " and labels " + c.describe_input(1) + " must have the same shape");
  if (s.has_rank() && s.rank() < 1)
    return c.error("logits " + c.describe_input(0) + " must have rank >= 1 (classes on the last axis)");
  c.set_output(0, c.input_dtype(0), drop_last(s));
  c.set_output(1, c.input_dtype(0), s);
  return Status::OK();
}

Status sparse_softmax_xent_shape(ShapeContext& c) {
  AF_RETURN_IF_ERROR(floating_input(c, 0));
  AF_RETURN_IF_ERROR(shape_fns::require_dtype(c, 1, {DType::i32, DType::i64}));
  const Shape& logits = c.input_shape(0);
  const Shape& labels = c.input_shape(1);
  if (logits.has_rank() && logits.rank() < 1)
    return c.error("logits " + c.describe_input(0) + " must have rank >= 1 (classes on the last axis)");
  Shape batch = drop_last(logits);
  Shape merged;
  if (!batch.merge(labels, &merged))
    return c.error("labels " + c.describe_input(1) + " must have the shape of logits " + c.describe_input(0) +
                   " without its last (class) axis");
  Shape full = logits;
  if (merged.has_rank()) {
    std::vector<int64_t> dims = merged.dims();
    dims.push_back(logits.has_rank() ? logits.dim(logits.rank() - 1) : Shape::kUnknown);
    full = Shape(std::move(dims));
  }
  c.set_output(0, c.input_dtype(0), merged);
  c.set_output(1, c.input_dtype(0), full);
  return Status::OK();
}

Status sigmoid_xent_shape(ShapeContext& c) {
  AF_RETURN_IF_ERROR(floating_input(c, 0));
  if (c.input_dtype(1) != c.input_dtype(0))
    return c.error("logits " + c.describe_input(0) + " and labels " + c.describe_input(1) + " differ in dtype");
  Shape s;
  if (!c.input_shape(0).merge(c.input_shape(1), &s))
    return c.error("logits " + c.describe_input(0) + " and labels " + c.describe_input(1) + " must have the same shape");
  c.set_output(0, c.input_dtype(0), s);
  return Status::OK();
}

}  // namespace

// value [..., C] + bias [C] (NHWC), or bias along axis 1 (NCHW).
AF_REGISTER_OP("BiasAdd").inputs(2).attr("data_format", "NHWC").shape_fn(bias_add_shape);
// The bias gradient: sum over every axis but the channel axis.
AF_REGISTER_OP("BiasAddGrad").inputs(1).attr("data_format", "NHWC").shape_fn(bias_add_grad_shape);

// sum(x^2) / 2, a scalar.
AF_REGISTER_OP("L2Loss").inputs(1).shape_fn([](ShapeContext& c) {
  AF_RETURN_IF_ERROR(floating_input(c, 0));
  c.set_output(0, c.input_dtype(0), Shape{});
  return Status::OK();
});

// logits [..., C], labels [..., C] (a distribution per row) -> loss [...], backprop
// [..., C] = softmax(logits) - labels.
AF_REGISTER_OP("SoftmaxCrossEntropyWithLogits").inputs(2).outputs(2).shape_fn(softmax_xent_shape);
// logits [..., C], labels [...] class indices in [0, C) -> loss [...], backprop [..., C].
AF_REGISTER_OP("SparseSoftmaxCrossEntropyWithLogits").inputs(2).outputs(2).shape_fn(sparse_softmax_xent_shape);
// Elementwise max(x,0) - x*z + log(1 + exp(-|x|)).
AF_REGISTER_OP("SigmoidCrossEntropyWithLogits").inputs(2).shape_fn(sigmoid_xent_shape);

}  // namespace actorflow
