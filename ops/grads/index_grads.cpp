// Gradients of Gather, Tile, Pad and Select. Gather on axis 0 (an embedding lookup)
// gives a sparse gradient, one row per index, so optimizers touch only those rows.
#include <string>
#include <vector>

#include "actorflow/dsl.h"
#include "actorflow/gradients.h"
#include "../../engine/src/dsl/dsl_build.h"

namespace actorflow {
namespace {

Status gather_grad(GradContext& c) {
  Output g = c.grad(0), params = c.input(0), indices = c.input(1);
  const int64_t axis = c.node().attr_int("axis");
  const Shape& ps = params.shape();
  // With params of unknown rank a negative axis may or may not be 0: take the dense
  // path, which resolves the axis at run time.
  const bool axis0 = axis == 0 || (ps.has_rank() && axis + ps.rank() == 0);
  if (axis0) {
    Output values = dsl::add(c.graph(), "GatherGradValues", "GatherGradValues", {g, indices});
    // Indices as i64 always, so sparse gradients from several gathers concatenate.
    Output flat = reshape(indices, Shape{-1});
    if (flat.dtype() != DType::i64) flat = cast(flat, DType::i64);
    c.set_input_grad(0, Gradient{{}, flat, values});
  } else {
    c.set_input_grad(0, dsl::add(c.graph(), "GatherGrad", "GatherGrad", {g, indices, params}, {{"axis", axis}}));
  }
  return Status::OK();
}

Status tile_grad(GradContext& c) {
  c.set_input_grad(0, dsl::add(c.graph(), "TileGrad", "TileGrad", {c.grad(0), c.input(0)},
                               {{"multiples", AttrValue::Ints(c.node().attr_ints("multiples"))}}));
  return Status::OK();
}

Status pad_grad(GradContext& c) {
  Output g = c.grad(0), x = c.input(0);
  const std::vector<int64_t> pads = c.node().attr_ints("paddings");
  std::vector<int64_t> begin;
  for (size_t i = 0; i < pads.size(); i += 2) begin.push_back(pads[i]);
  const Shape& in = x.shape();
  if (in.is_fully_defined() && static_cast<size_t>(in.rank()) == begin.size()) {
    c.set_input_grad(0, slice(g, begin, in.dims()));
  } else {
    c.set_input_grad(0, dsl::add(c.graph(), "SliceLike", "SliceLike", {g, x}, {{"begin", AttrValue::Ints(begin)}}));
  }
  return Status::OK();
}

Status select_grad(GradContext& c) {
  // The condition is boolean: no gradient. Each branch gets g where it was chosen.
  Output g = c.grad(0), cond = c.input(0);
  Output zero = scalar_like(c.graph(), g.dtype(), 0.0, "zero");
  c.set_input_grad(1, c.reduce_to_input(where(cond, g, zero), 1));
  c.set_input_grad(2, c.reduce_to_input(where(cond, zero, g), 2));
  return Status::OK();
}

}  // namespace

AF_REGISTER_GRADIENT("Gather", gather_grad);
AF_REGISTER_GRADIENT("Tile", tile_grad);
AF_REGISTER_GRADIENT("Pad", pad_grad);
AF_REGISTER_GRADIENT("Select", select_grad);
AF_NO_GRADIENT("OneHot");

}  // namespace actorflow
