// Random tensors: RandomNormal, RandomUniform, TruncatedNormal. Stateful: each run draws
// the next values of the node's generator, so they are never folded or deduplicated.
#include <cmath>

#include "actorflow/op_registry.h"
#include "common/fill_util.h"

namespace actorflow {
namespace {

Status number_attr(const ShapeContext& c, const char* key, double* out) {
  const AttrValue* a = c.node().find_attr(key);
  if (a && a->is<double>()) *out = a->get<double>();
  else if (a && a->is<int64_t>()) *out = static_cast<double>(a->get<int64_t>());
  else return c.error(std::string("attribute '") + key + "' must be a number");
  if (!std::isfinite(*out)) return c.error(std::string("attribute '") + key + "' must be finite, got " + std::to_string(*out));
  return Status::OK();
}

// Shape, dtype and seeds shared by the three ops; (a, b) are (mean, stddev) or
// (minval, maxval).
Status random_shape(ShapeContext& c, const char* ka, const char* kb) {
  DType t = c.node().attr_dtype("dtype");
  if (!is_floating(t)) return c.error("attribute 'dtype' must be f32 or f64");
  const AttrValue* sa = c.node().find_attr("shape");
  if (!sa || !sa->is<Shape>()) return c.error("attribute 'shape' must be a shape");
  const Shape& s = sa->get<Shape>();
  int64_t n;
  if (!s.is_fully_defined() || !fill_util::checked_num_elements(s.dims(), &n))
    return c.error("attribute 'shape' must be fully defined and of a sane size, got " + s.to_string());
  for (const char* k : {"seed", "seed2"}) {
    const AttrValue* v = c.node().find_attr(k);
    if (!v || !v->is<int64_t>()) return c.error(std::string("attribute '") + k + "' must be an integer");
  }
  double a, b;
  AF_RETURN_IF_ERROR(number_attr(c, ka, &a));
  AF_RETURN_IF_ERROR(number_attr(c, kb, &b));
  if (!fill_util::value_fits(a, t) || !fill_util::value_fits(b, t))
    return c.error(std::string("attributes '") + ka + "' and '" + kb + "' must fit dtype " + dtype_name(t));
  if (b < a && std::string(kb) == "maxval")
    return c.error("maxval " + std::to_string(b) + " is below minval " + std::to_string(a));
  if (b < 0 && std::string(kb) == "stddev") return c.error("stddev " + std::to_string(b) + " is negative");
  c.set_output(0, t, s);
  return Status::OK();
}

}  // namespace

AF_REGISTER_OP("RandomNormal")
    .inputs(0)
    .stateful()
    .required_attr("shape")
    .attr("dtype", DType::f32)
    .attr("mean", 0.0)
    .attr("stddev", 1.0)
    .attr("seed", int64_t{0})
    .attr("seed2", int64_t{0})
    .shape_fn([](ShapeContext& c) { return random_shape(c, "mean", "stddev"); });

AF_REGISTER_OP("RandomUniform")
    .inputs(0)
    .stateful()
    .required_attr("shape")
    .attr("dtype", DType::f32)
    .attr("minval", 0.0)
    .attr("maxval", 1.0)
    .attr("seed", int64_t{0})
    .attr("seed2", int64_t{0})
    .shape_fn([](ShapeContext& c) { return random_shape(c, "minval", "maxval"); });

AF_REGISTER_OP("TruncatedNormal")
    .inputs(0)
    .stateful()
    .required_attr("shape")
    .attr("dtype", DType::f32)
    .attr("mean", 0.0)
    .attr("stddev", 1.0)
    .attr("seed", int64_t{0})
    .attr("seed2", int64_t{0})
    .shape_fn([](ShapeContext& c) { return random_shape(c, "mean", "stddev"); });

}  // namespace actorflow
