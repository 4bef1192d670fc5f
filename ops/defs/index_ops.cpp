// Indexing, selection and padding: Gather, OneHot, Tile, Pad, Select.
#include "actorflow/op_registry.h"
#include "common/fill_util.h"
#include "common/shape_fns.h"

namespace actorflow {
namespace {

// An integer attribute that must be present with an integer value; fuzzed GraphDefs may
// carry any kind under any key.
Status int_attr(const ShapeContext& c, const std::string& key, int64_t* out) {
  const AttrValue* a = c.node().find_attr(key);
  if (!a || !a->is<int64_t>()) return c.error("attribute '" + key + "' must be an integer");
  *out = a->get<int64_t>();
  return Status::OK();
}

Status ints_attr(const ShapeContext& c, const std::string& key, std::vector<int64_t>* out) {
  const AttrValue* a = c.node().find_attr(key);
  if (!a || !a->is<AttrValue::Ints>()) return c.error("attribute '" + key + "' must be a list of integers");
  *out = a->get<AttrValue::Ints>();
  return Status::OK();
}

Status float_attr(const ShapeContext& c, const std::string& key, double* out) {
  const AttrValue* a = c.node().find_attr(key);
  if (a && a->is<double>()) *out = a->get<double>();
  else if (a && a->is<int64_t>()) *out = static_cast<double>(a->get<int64_t>());
  else return c.error("attribute '" + key + "' must be a number");
  return Status::OK();
}

Status value_fits(const ShapeContext& c, const std::string& key, double v, DType t) {
  if (!fill_util::value_fits(v, t))
    return c.error("attribute '" + key + "' = " + std::to_string(v) + " does not fit dtype " + dtype_name(t));
  return Status::OK();
}

Status gather_shape(ShapeContext& c) {
  AF_RETURN_IF_ERROR(shape_fns::require_dtype(c, 1, {DType::i32, DType::i64}));
  int64_t axis;
  AF_RETURN_IF_ERROR(int_attr(c, "axis", &axis));
  const Shape& params = c.input_shape(0);
  const Shape& indices = c.input_shape(1);
  DType t = c.input_dtype(0);
  if (!params.has_rank()) {
    c.set_output(0, t, Shape::unknown_rank());
    return Status::OK();
  }
  const int r = params.rank();
  if (r == 0) return c.error("params " + c.describe_input(0) + " must have rank >= 1");
  if (axis < -r || axis >= r)
    return c.error("axis " + std::to_string(axis) + " is out of range for params " + c.describe_input(0));
  const int a = static_cast<int>(axis < 0 ? axis + r : axis);
  if (!indices.has_rank()) {
    c.set_output(0, t, Shape::unknown_rank());
    return Status::OK();
  }
  std::vector<int64_t> dims(params.dims().begin(), params.dims().begin() + a);
  dims.insert(dims.end(), indices.dims().begin(), indices.dims().end());
  dims.insert(dims.end(), params.dims().begin() + a + 1, params.dims().end());
  c.set_output(0, t, Shape(std::move(dims)));
  return Status::OK();
}

Status one_hot_shape(ShapeContext& c) {
  AF_RETURN_IF_ERROR(shape_fns::require_dtype(c, 0, {DType::i32, DType::i64, DType::u8}));
  int64_t depth;
  double on, off;
  AF_RETURN_IF_ERROR(int_attr(c, "depth", &depth));
  AF_RETURN_IF_ERROR(float_attr(c, "on_value", &on));
  AF_RETURN_IF_ERROR(float_attr(c, "off_value", &off));
  DType t = c.node().attr_dtype("dtype");
  if (!is_numeric(t) && t != DType::boolean) return c.error("attribute 'dtype' must be a numeric or bool dtype");
  if (depth < 0 || depth > fill_util::kMaxElements)
    return c.error("depth " + std::to_string(depth) + " must be non-negative");
  AF_RETURN_IF_ERROR(value_fits(c, "on_value", on, t));
  AF_RETURN_IF_ERROR(value_fits(c, "off_value", off, t));
  const Shape& in = c.input_shape(0);
  if (!in.has_rank()) {
    c.set_output(0, t, Shape::unknown_rank());
    return Status::OK();
  }
  std::vector<int64_t> dims = in.dims();
  dims.push_back(depth);
  Shape out(std::move(dims));
  if (!fill_util::known_dims_fit(out))
    return c.error("indices " + c.describe_input(0) + " with depth " + std::to_string(depth) + " give too many elements");
  c.set_output(0, t, std::move(out));
  return Status::OK();
}

Status tile_shape(ShapeContext& c) {
  std::vector<int64_t> mult;
  AF_RETURN_IF_ERROR(ints_attr(c, "multiples", &mult));
  const Shape& in = c.input_shape(0);
  if (in.has_rank() && static_cast<size_t>(in.rank()) != mult.size())
    return c.error("multiples has " + std::to_string(mult.size()) + " entries but input " + c.describe_input(0) +
                   " has rank " + std::to_string(in.rank()));
  std::vector<int64_t> dims(mult.size());
  for (size_t i = 0; i < mult.size(); ++i) {
    const int64_t m = mult[i];
    if (m < 0) return c.error("multiples[" + std::to_string(i) + "] = " + std::to_string(m) + " is negative");
    const int64_t d = in.has_rank() ? in.dim(static_cast<int>(i)) : -1;
    if (d < 0) {
      dims[i] = m == 0 ? 0 : -1;
    } else if (!fill_util::checked_mul(d, m, &dims[i])) {
      return c.error("dim " + std::to_string(i) + " of input " + c.describe_input(0) + " times " + std::to_string(m) +
                     " is too large");
    }
  }
  Shape out(std::move(dims));
  if (!fill_util::known_dims_fit(out)) return c.error("tiling input " + c.describe_input(0) + " gives too many elements");
  c.set_output(0, c.input_dtype(0), std::move(out));
  return Status::OK();
}

Status pad_shape(ShapeContext& c) {
  std::vector<int64_t> pads;
  double value;
  AF_RETURN_IF_ERROR(ints_attr(c, "paddings", &pads));
  AF_RETURN_IF_ERROR(float_attr(c, "constant_value", &value));
  DType t = c.input_dtype(0);
  if (!is_numeric(t) && t != DType::boolean) return c.error("input " + c.describe_input(0) + " must be numeric or bool");
  AF_RETURN_IF_ERROR(value_fits(c, "constant_value", value, t));
  const Shape& in = c.input_shape(0);
  if (pads.size() % 2 != 0 || (in.has_rank() && pads.size() != 2 * static_cast<size_t>(in.rank())))
    return c.error("paddings must hold a (before, after) pair per dim of input " + c.describe_input(0) + ", got " +
                   std::to_string(pads.size()) + " values");
  for (size_t i = 0; i < pads.size(); ++i)
    if (pads[i] < 0 || pads[i] > fill_util::kMaxElements)
      return c.error("paddings[" + std::to_string(i) + "] = " + std::to_string(pads[i]) + " must be non-negative");
  std::vector<int64_t> dims(pads.size() / 2);
  for (size_t i = 0; i < dims.size(); ++i) {
    const int64_t d = in.has_rank() ? in.dim(static_cast<int>(i)) : -1;
    dims[i] = d < 0 ? -1 : d + pads[2 * i] + pads[2 * i + 1];
    if (dims[i] > fill_util::kMaxElements) return c.error("padded dim " + std::to_string(i) + " is too large");
  }
  Shape out(std::move(dims));
  if (!fill_util::known_dims_fit(out)) return c.error("padding input " + c.describe_input(0) + " gives too many elements");
  c.set_output(0, t, std::move(out));
  return Status::OK();
}

Status select_shape(ShapeContext& c) {
  AF_RETURN_IF_ERROR(shape_fns::require_dtype(c, 0, {DType::boolean}));
  if (c.input_dtype(1) != c.input_dtype(2))
    return c.error("branches have different dtypes: " + c.describe_input(1) + " and " + c.describe_input(2));
  Shape ab, out;
  if (!broadcast_shapes(c.input_shape(1), c.input_shape(2), &ab) || !broadcast_shapes(c.input_shape(0), ab, &out))
    return c.error("shapes cannot be broadcast together: cond " + c.describe_input(0) + ", " + c.describe_input(1) +
                   " and " + c.describe_input(2));
  c.set_output(0, c.input_dtype(1), out);
  return Status::OK();
}

}  // namespace

AF_REGISTER_OP("Gather").inputs(2).attr("axis", int64_t{0}).shape_fn(gather_shape);
AF_REGISTER_OP("OneHot")
    .inputs(1)
    .required_attr("depth")
    .attr("on_value", 1.0)
    .attr("off_value", 0.0)
    .attr("dtype", DType::f32)
    .shape_fn(one_hot_shape);
AF_REGISTER_OP("Tile").inputs(1).required_attr("multiples").shape_fn(tile_shape);
AF_REGISTER_OP("Pad").inputs(1).required_attr("paddings").attr("constant_value", 0.0).shape_fn(pad_shape);
AF_REGISTER_OP("Select").inputs(3).shape_fn(select_shape);

}  // namespace actorflow
