// Gradients of the shape ops. Each moves the gradient back into the input's layout;
// when the input's shape is fully known at graph time that is a plain Reshape / Pad /
// SplitV with static attrs, otherwise a support op reads the input's runtime shape
// (ReshapeLike, PadLike, SplitLike in ops/defs/grad_more_ops.cpp).
#include <string>
#include <vector>

#include "actorflow/dsl.h"
#include "actorflow/gradients.h"
#include "../../engine/src/dsl/dsl_build.h"

namespace actorflow {
namespace {

// g with the elements in the runtime shape of input i.
Output reshape_to_input(GradContext& c, const Output& g, int i) {
  Output x = c.input(i);
  if (x.shape().is_fully_defined()) return reshape(g, x.shape());
  return dsl::add(c.graph(), "ReshapeLike", "ReshapeLike", {g, x});
}

Status reshape_grad(GradContext& c) {
  c.set_input_grad(0, reshape_to_input(c, c.grad(0), 0));
  return Status::OK();
}

Status squeeze_grad(GradContext& c) {
  c.set_input_grad(0, reshape_to_input(c, c.grad(0), 0));
  return Status::OK();
}

Status expand_dims_grad(GradContext& c) {
  // ExpandDims puts the new dim at `axis` of the result (a negative axis counts from the
  // end of the result), so squeezing that same axis undoes it whatever the rank.
  c.set_input_grad(0, squeeze(c.grad(0), {c.node().attr_int("axis")}));
  return Status::OK();
}

Status transpose_grad(GradContext& c) {
  std::vector<int64_t> perm = c.node().attr_ints("perm");
  // An empty perm reverses the dims, which is its own inverse.
  std::vector<int64_t> inv(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) {
    if (perm[i] < 0 || perm[i] >= static_cast<int64_t>(perm.size()))
      return invalid_argument("bad perm entry " + std::to_string(perm[i]));
    inv[static_cast<size_t>(perm[i])] = static_cast<int64_t>(i);
  }
  c.set_input_grad(0, transpose(c.grad(0), inv));
  return Status::OK();
}

Status concat_grad(GradContext& c) {
  Output g = c.grad(0);
  const int n = c.num_inputs();
  if (n == 1) {
    c.set_input_grad(0, g);
    return Status::OK();
  }
  const int64_t axis = c.node().attr_int("axis");
  // Static sizes along the axis when every input's rank and size there are known.
  std::vector<int64_t> sizes;
  for (int i = 0; i < n; ++i) {
    const Shape& s = c.input(i).shape();
    if (!s.has_rank() || s.rank() == 0) break;
    const int64_t a = axis < 0 ? axis + s.rank() : axis;
    if (a < 0 || a >= s.rank() || s.dim(static_cast<int>(a)) < 0) break;
    sizes.push_back(s.dim(static_cast<int>(a)));
  }
  std::vector<Output> parts;
  if (static_cast<int>(sizes.size()) == n) {
    parts = split(g, sizes, axis);
  } else {
    NodeSpec spec;
    spec.op = "SplitLike";
    spec.name = "SplitLike";
    spec.inputs.push_back(g);
    for (int i = 0; i < n; ++i) spec.inputs.push_back(c.input(i));
    spec.attrs["axis"] = axis;
    Operation op = dsl::add_op(c.graph(), std::move(spec));
    for (int i = 0; i < n; ++i) parts.push_back(op.output(i));
  }
  for (int i = 0; i < n; ++i) c.set_input_grad(i, parts[static_cast<size_t>(i)]);
  return Status::OK();
}

Status split_grad(GradContext& c) {
  // Outputs without a gradient contribute zeros of their size.
  std::vector<Output> parts;
  for (int i = 0; i < c.num_outputs(); ++i) parts.push_back(c.grad_or_zeros(i));
  c.set_input_grad(0, parts.size() == 1 ? parts[0] : concat(parts, c.node().attr_int("axis")));
  return Status::OK();
}

Status slice_grad(GradContext& c) {
  Output g = c.grad(0), x = c.input(0);
  const std::vector<int64_t> begin = c.node().attr_ints("begin");
  const Shape& in = x.shape();
  const Shape& out = c.output(0).shape();
  if (in.is_fully_defined() && out.is_fully_defined() && in.rank() == static_cast<int>(begin.size())) {
    std::vector<std::pair<int64_t, int64_t>> pads;
    for (int d = 0; d < in.rank(); ++d) {
      const int64_t b = begin[static_cast<size_t>(d)];
      pads.emplace_back(b, in.dim(d) - b - out.dim(d));
    }
    c.set_input_grad(0, pad(g, pads));
  } else {
    c.set_input_grad(0, dsl::add(c.graph(), "PadLike", "PadLike", {g, x}, {{"begin", AttrValue::Ints(begin)}}));
  }
  return Status::OK();
}

}  // namespace

AF_REGISTER_GRADIENT("Reshape", reshape_grad);
AF_REGISTER_GRADIENT("Squeeze", squeeze_grad);
AF_REGISTER_GRADIENT("ExpandDims", expand_dims_grad);
AF_REGISTER_GRADIENT("Transpose", transpose_grad);
AF_REGISTER_GRADIENT("Concat", concat_grad);
AF_REGISTER_GRADIENT("Split", split_grad);
AF_REGISTER_GRADIENT("SplitV", split_grad);
AF_REGISTER_GRADIENT("Slice", slice_grad);

}  // namespace actorflow
