// Neural-network ops on NHWC tensors: Conv2D and its two backprops, MaxPool / AvgPool
// and their gradients, FusedBatchNorm (+Grad) and Dropout. TF semantics throughout; the
// shape functions accept unknown dims and unknown rank and reject bad attributes with an
// error, since hostile GraphDefs run them too.
#include <cmath>

#include "actorflow/op_registry.h"
#include "common/conv_geometry.h"
#include "common/shape_fns.h"

namespace actorflow {
namespace {

using conv_geom::Axis;
using conv_geom::Padding;

Status float_input(ShapeContext& c, int i) {
  DType t = c.input_dtype(i);
  if (t != DType::f32 && t != DType::f64)
    return c.error("needs a float32 or float64 input, got " + c.describe_input(i));
  return Status::OK();
}

Status same_dtype(ShapeContext& c, int i, int j) {
  if (c.input_dtype(i) != c.input_dtype(j))
    return c.error("inputs have different dtypes: " + c.describe_input(i) + " and " + c.describe_input(j));
  return Status::OK();
}

// Input i as a rank-4 shape; unknown rank becomes four unknown dims.
Status rank4(ShapeContext& c, int i, const char* what, Shape* out) {
  const Shape& s = c.input_shape(i);
  if (!s.has_rank()) {
    *out = Shape{-1, -1, -1, -1};
    return Status::OK();
  }
  if (s.rank() != 4)
    return c.error(std::string(what) + " " + c.describe_input(i) + " must have rank 4, got rank " + std::to_string(s.rank()));
  *out = s;
  return Status::OK();
}

// Merges two dims that must agree (either may be unknown).
bool merge_dim(int64_t a, int64_t b, int64_t* out) {
  if (a >= 0 && b >= 0 && a != b) return false;
  *out = a >= 0 ? a : b;
  return true;
}

std::string dim_str(int64_t d) { return d < 0 ? "?" : std::to_string(d); }

struct Window2D {
  int64_t kh = 1, kw = 1, sh = 1, sw = 1;
  Padding padding = Padding::valid;
};

// ksize (pooling) or the filter's spatial dims (conv), strides and padding.
Status window_attrs(ShapeContext& c, bool with_ksize, Window2D* w) {
  std::string err;
  if (with_ksize && !conv_geom::parse_hw(c.node(), "ksize", &w->kh, &w->kw, &err)) return c.error(err);
  if (!conv_geom::parse_hw(c.node(), "strides", &w->sh, &w->sw, &err)) return c.error(err);
  if (!conv_geom::parse_padding(c.node(), &w->padding, &err)) return c.error(err);
  return Status::OK();
}

// Output [n, oh, ow, ch] of a window over input x (NHWC); kh/kw may be unknown (-1) for
// a filter of unknown shape, which makes the output's spatial dims unknown.
Status windowed_output(ShapeContext& c, const Shape& x, const Window2D& w, int64_t ch, Shape* out) {
  Axis ah, aw;
  std::string err;
  auto one = [&](int64_t in, int64_t k, int64_t s, Axis* ax) -> bool {
    if (k < 0) {
      ax->out = -1;
      return true;
    }
    return conv_geom::window(in, k, s, w.padding, ax, &err);
  };
  if (!one(x.dim(1), w.kh, w.sh, &ah) || !one(x.dim(2), w.kw, w.sw, &aw))
    return c.error("input " + c.describe_input(0) + ": " + err);
  *out = Shape{x.dim(0), ah.out, aw.out, ch};
  return Status::OK();
}

// Conv2D(input [N,H,W,C], filter [KH,KW,C,O]) -> [N,OH,OW,O].
Status conv_forward_shape(ShapeContext& c, int x_i, int f_i, Shape* x, Shape* f, Shape* out) {
  AF_RETURN_IF_ERROR(float_input(c, x_i));
  AF_RETURN_IF_ERROR(same_dtype(c, x_i, f_i));
  AF_RETURN_IF_ERROR(rank4(c, x_i, "input", x));
  AF_RETURN_IF_ERROR(rank4(c, f_i, "filter", f));
  for (int d = 0; d < 2; ++d)
    if (f->dim(d) == 0) return c.error("filter " + c.describe_input(f_i) + " has an empty spatial dim");
  int64_t ch;
  if (!merge_dim(x->dim(3), f->dim(2), &ch))
    return c.error("input " + c.describe_input(x_i) + " has " + dim_str(x->dim(3)) + " channels but filter " +
                   c.describe_input(f_i) + " expects " + dim_str(f->dim(2)) + " (filter is [KH,KW,C,O])");
  Window2D w;
  AF_RETURN_IF_ERROR(window_attrs(c, false, &w));
  w.kh = f->dim(0);
  w.kw = f->dim(1);
  return windowed_output(c, *x, w, f->dim(3), out);
}

Status conv2d_shape(ShapeContext& c) {
  Shape x, f, out;
  AF_RETURN_IF_ERROR(conv_forward_shape(c, 0, 1, &x, &f, &out));
  c.set_output(0, c.input_dtype(0), out);
  return Status::OK();
}

// _FusedConv2D(x, filter, bias): conv2d(x, filter) + bias along the channels, then Relu
// when attr relu is set. The bias must be a vector of the output's channels.
Status fused_conv2d_shape(ShapeContext& c) {
  AF_RETURN_IF_ERROR(conv2d_shape(c));
  AF_RETURN_IF_ERROR(same_dtype(c, 0, 2));
  const Shape& bias = c.input_shape(2);
  if (bias.has_rank() && bias.rank() != 1) return c.error("bias " + c.describe_input(2) + " must be a vector");
  const Shape out = c.node().output_shapes[0];
  if (!bias.has_rank() || !out.has_rank()) return Status::OK();
  const int64_t o = out.dim(3), b = bias.dim(0);
  if (o >= 0 && b >= 0 && o != b)
    return c.error("bias " + c.describe_input(2) + " does not match the " + std::to_string(o) + " output channels");
  if (o < 0 && b >= 0) c.set_output(0, c.input_dtype(0), Shape{out.dim(0), out.dim(1), out.dim(2), b});
  return Status::OK();
}

// The backprops take (input, filter, out_backprop); the input (for BackpropInput) or the
// filter (for BackpropFilter) only lends its shape. out_backprop must fit the forward.
Status conv_backprop_shape(ShapeContext& c, int result_of) {
  Shape x, f, expect;
  AF_RETURN_IF_ERROR(conv_forward_shape(c, 0, 1, &x, &f, &expect));
  AF_RETURN_IF_ERROR(same_dtype(c, 0, 2));
  Shape dy;
  AF_RETURN_IF_ERROR(rank4(c, 2, "out_backprop", &dy));
  if (!expect.compatible_with(dy))
    return c.error("out_backprop " + c.describe_input(2) + " does not match the convolution's output shape " +
                   expect.to_string() + " for input " + c.describe_input(0) + " and filter " + c.describe_input(1));
  c.set_output(0, c.input_dtype(0), result_of == 0 ? x : f);
  return Status::OK();
}

// The pooled shape of input 0.
Status pooled_shape(ShapeContext& c, Shape* out) {
  AF_RETURN_IF_ERROR(float_input(c, 0));
  Shape x;
  AF_RETURN_IF_ERROR(rank4(c, 0, "input", &x));
  Window2D w;
  AF_RETURN_IF_ERROR(window_attrs(c, true, &w));
  return windowed_output(c, x, w, x.dim(3), out);
}

Status pool_shape(ShapeContext& c) {
  Shape out;
  AF_RETURN_IF_ERROR(pooled_shape(c, &out));
  c.set_output(0, c.input_dtype(0), out);
  return Status::OK();
}

// Checks that input `i` is shaped like the pooling of input 0; returns that shape.
Status pooled_like(ShapeContext& c, int i, const char* what, Shape* pooled) {
  AF_RETURN_IF_ERROR(pooled_shape(c, pooled));
  AF_RETURN_IF_ERROR(same_dtype(c, 0, i));
  Shape s;
  AF_RETURN_IF_ERROR(rank4(c, i, what, &s));
  if (!pooled->compatible_with(s))
    return c.error(std::string(what) + " " + c.describe_input(i) + " does not match the pooled shape " +
                   pooled->to_string() + " of input " + c.describe_input(0));
  return Status::OK();
}

// MaxPoolGrad(orig_input, orig_output, grad) -> shape of orig_input.
Status max_pool_grad_shape(ShapeContext& c) {
  Shape pooled;
  AF_RETURN_IF_ERROR(pooled_like(c, 1, "orig_output", &pooled));
  AF_RETURN_IF_ERROR(pooled_like(c, 2, "grad", &pooled));
  c.set_output(0, c.input_dtype(0), c.input_shape(0));
  return Status::OK();
}

// MaxPoolGradGrad(orig_input, orig_output, grad of orig_input's shape) -> pooled shape.
Status max_pool_grad_grad_shape(ShapeContext& c) {
  Shape pooled;
  AF_RETURN_IF_ERROR(pooled_like(c, 1, "orig_output", &pooled));
  AF_RETURN_IF_ERROR(same_dtype(c, 0, 2));
  if (!c.input_shape(0).compatible_with(c.input_shape(2)))
    return c.error("grad " + c.describe_input(2) + " must be shaped like orig_input " + c.describe_input(0));
  c.set_output(0, c.input_dtype(0), pooled);
  return Status::OK();
}

// AvgPoolGrad(orig_input, grad) -> shape of orig_input.
Status avg_pool_grad_shape(ShapeContext& c) {
  Shape pooled;
  AF_RETURN_IF_ERROR(pooled_like(c, 1, "grad", &pooled));
  c.set_output(0, c.input_dtype(0), c.input_shape(0));
  return Status::OK();
}

Status epsilon_attr(ShapeContext& c) {
  const AttrValue* e = c.node().find_attr("epsilon");
  if (!e || !(e->is<double>() || e->is<int64_t>())) return c.error("attribute 'epsilon' must be a number");
  double v = c.node().attr_float("epsilon");
  if (!std::isfinite(v) || v < 0) return c.error("attribute 'epsilon' must be finite and >= 0, got " + std::to_string(v));
  return Status::OK();
}

Status bool_scalar_input(ShapeContext& c, int i, const char* what) {
  if (c.input_dtype(i) != DType::boolean || (c.input_shape(i).has_rank() && c.input_shape(i).rank() != 0))
    return c.error(std::string(what) + " " + c.describe_input(i) + " must be a bool scalar");
  return Status::OK();
}

// Per-channel vector inputs `vec` of length C; merges them into *channels.
Status channel_vectors(ShapeContext& c, int x_i, const std::vector<int>& vec, int64_t* channels) {
  for (int i : vec) {
    AF_RETURN_IF_ERROR(same_dtype(c, x_i, i));
    const Shape& s = c.input_shape(i);
    if (s.has_rank() && s.rank() != 1)
      return c.error("input " + c.describe_input(i) + " must be a vector of one value per channel");
    if (s.has_rank() && !merge_dim(*channels, s.dim(0), channels))
      return c.error("input " + c.describe_input(i) + " does not match the channels (last dim) of " +
                     c.describe_input(x_i));
  }
  return Status::OK();
}

// x [..., C]: channels last, rank >= 2. Returns C (maybe unknown).
Status channels_last(ShapeContext& c, int x_i, const Shape& x, int64_t* channels) {
  AF_RETURN_IF_ERROR(float_input(c, x_i));
  if (x.has_rank() && x.rank() < 2)
    return c.error("input " + c.describe_input(x_i) + " must have rank >= 2 (channels last)");
  *channels = x.has_rank() ? x.dim(x.rank() - 1) : -1;
  return Status::OK();
}

// FusedBatchNorm(x, scale, offset, mean, variance[, is_training]) -> y, batch_mean,
// batch_variance.
Status fused_batch_norm_shape(ShapeContext& c) {
  AF_RETURN_IF_ERROR(epsilon_attr(c));
  int64_t ch;
  AF_RETURN_IF_ERROR(channels_last(c, 0, c.input_shape(0), &ch));
  AF_RETURN_IF_ERROR(channel_vectors(c, 0, {1, 2, 3, 4}, &ch));
  if (c.num_inputs() == 6) AF_RETURN_IF_ERROR(bool_scalar_input(c, 5, "is_training"));
  const DType t = c.input_dtype(0);
  c.set_output(0, t, c.input_shape(0));
  c.set_output(1, t, Shape{ch});
  c.set_output(2, t, Shape{ch});
  return Status::OK();
}

// FusedBatchNormGrad(dy, x, scale, mean, variance[, d_batch_mean, d_batch_variance
// [, is_training]]) -> dx, dscale, doffset, dmean, dvariance.
Status fused_batch_norm_grad_shape(ShapeContext& c) {
  AF_RETURN_IF_ERROR(epsilon_attr(c));
  if (c.num_inputs() == 6) return c.error("takes 5, 7 or 8 inputs (d_batch_mean and d_batch_variance come together)");
  AF_RETURN_IF_ERROR(same_dtype(c, 0, 1));
  Shape x;
  if (!c.input_shape(1).merge(c.input_shape(0), &x))
    return c.error("dy " + c.describe_input(0) + " must be shaped like x " + c.describe_input(1));
  int64_t ch;
  AF_RETURN_IF_ERROR(channels_last(c, 1, x, &ch));
  std::vector<int> vec = {2, 3, 4};
  if (c.num_inputs() >= 7) vec = {2, 3, 4, 5, 6};
  AF_RETURN_IF_ERROR(channel_vectors(c, 1, vec, &ch));
  if (c.num_inputs() == 8) AF_RETURN_IF_ERROR(bool_scalar_input(c, 7, "is_training"));
  const DType t = c.input_dtype(0);
  c.set_output(0, t, x);
  for (int o = 1; o < 5; ++o) c.set_output(o, t, Shape{ch});
  return Status::OK();
}

// Dropout(x[, training]) -> y, mask (mask holds 0 or 1/keep_prob, in x's dtype).
Status dropout_shape(ShapeContext& c) {
  AF_RETURN_IF_ERROR(float_input(c, 0));
  const AttrValue* kp = c.node().find_attr("keep_prob");
  if (!kp || !(kp->is<double>() || kp->is<int64_t>())) return c.error("attribute 'keep_prob' must be a number");
  const double keep = c.node().attr_float("keep_prob");
  if (!(keep > 0 && keep <= 1)) return c.error("attribute 'keep_prob' must be in (0, 1], got " + std::to_string(keep));
  for (const char* k : {"seed", "seed2"}) {
    const AttrValue* v = c.node().find_attr(k);
    if (!v || !v->is<int64_t>()) return c.error(std::string("attribute '") + k + "' must be an integer");
  }
  if (c.num_inputs() == 2) AF_RETURN_IF_ERROR(bool_scalar_input(c, 1, "training"));
  c.set_output(0, c.input_dtype(0), c.input_shape(0));
  c.set_output(1, c.input_dtype(0), c.input_shape(0));
  return Status::OK();
}

}  // namespace

AF_REGISTER_OP("Conv2D")
    .optional_attr("compute_type")
    .inputs(2)
    .attr("strides", AttrValue::Ints{1, 1})
    .required_attr("padding")
    .expensive()
    .shape_fn(conv2d_shape);
// Conv2D -> BiasAdd (-> Relu) as one node, written by the plan-time fusion pass
// (actors/src/graph_passes.cpp) after autodiff has run, so it has no gradient; CPU kernel
// only (ops/cpu/conv_kernels.cpp), so the pass leaves graphs placed on a GPU alone.
AF_REGISTER_OP("_FusedConv2D")
    .optional_attr("compute_type")
    .inputs(3)
    .attr("strides", AttrValue::Ints{1, 1})
    .required_attr("padding")
    .attr("relu", false)
    .expensive()
    .shape_fn(fused_conv2d_shape);
AF_REGISTER_OP("Conv2DBackpropInput")
    .optional_attr("compute_type")
    .inputs(3)
    .attr("strides", AttrValue::Ints{1, 1})
    .required_attr("padding")
    .expensive()
    .shape_fn([](ShapeContext& c) { return conv_backprop_shape(c, 0); });
AF_REGISTER_OP("Conv2DBackpropFilter")
    .optional_attr("compute_type")
    .inputs(3)
    .attr("strides", AttrValue::Ints{1, 1})
    .required_attr("padding")
    .expensive()
    .shape_fn([](ShapeContext& c) { return conv_backprop_shape(c, 1); });

AF_REGISTER_OP("MaxPool").inputs(1).required_attr("ksize").attr("strides", AttrValue::Ints{1, 1}).required_attr("padding").shape_fn(pool_shape);
AF_REGISTER_OP("AvgPool").inputs(1).required_attr("ksize").attr("strides", AttrValue::Ints{1, 1}).required_attr("padding").shape_fn(pool_shape);
AF_REGISTER_OP("MaxPoolGrad")
    .inputs(3)
    .required_attr("ksize")
    .attr("strides", AttrValue::Ints{1, 1})
    .required_attr("padding")
    .shape_fn(max_pool_grad_shape);
// where(orig_input > 0, MaxPoolGrad(orig_input, orig_output, grad), 0) as one node: a
// pooled Relu's gradient folded into the pooling's. Written by the plan-time pass of
// actors/src/pool_grad_fusion.h after autodiff has run, so it has no gradient; CPU
// kernel only (ops/cpu/pool_kernels.cpp).
AF_REGISTER_OP("_FusedMaxPoolGrad")
    .inputs(3)
    .required_attr("ksize")
    .attr("strides", AttrValue::Ints{1, 1})
    .required_attr("padding")
    .shape_fn(max_pool_grad_shape);
AF_REGISTER_OP("MaxPoolGradGrad")
    .inputs(3)
    .required_attr("ksize")
    .attr("strides", AttrValue::Ints{1, 1})
    .required_attr("padding")
    .shape_fn(max_pool_grad_grad_shape);
AF_REGISTER_OP("AvgPoolGrad")
    .inputs(2)
    .required_attr("ksize")
    .attr("strides", AttrValue::Ints{1, 1})
    .required_attr("padding")
    .shape_fn(avg_pool_grad_shape);

AF_REGISTER_OP("FusedBatchNorm")
    .inputs(5, 6)
    .outputs(3)
    .attr("epsilon", 0.001)
    .attr("is_training", true)
    .shape_fn(fused_batch_norm_shape);
AF_REGISTER_OP("FusedBatchNormGrad")
    .inputs(5, 8)
    .outputs(5)
    .attr("epsilon", 0.001)
    .attr("is_training", true)
    .shape_fn(fused_batch_norm_grad_shape);

AF_REGISTER_OP("Dropout")
    .inputs(1, 2)
    .outputs(2)
    .stateful()
    .required_attr("keep_prob")
    .attr("seed", int64_t{0})
    .attr("seed2", int64_t{0})
    .shape_fn(dropout_shape);

}  // namespace actorflow
