// Shape manipulation: Reshape, Transpose, ExpandDims, Squeeze, Concat, Split, SplitV,
// Slice. Every shape function accepts unknown dims and unknown rank, and rejects bad
// attributes with an error (GraphDefs may be hostile, so nothing here may crash).
#include <algorithm>
#include <limits>

#include "actorflow/op_registry.h"
#include "common/shape_fns.h"

namespace actorflow {
namespace {

std::string ints_to_string(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s + "]";
}

// A large cap on output counts and element counts: a GraphDef asking for more is bogus,
// and refusing it keeps products of dims from overflowing int64.
constexpr int64_t kMaxElements = int64_t{1} << 56;
constexpr int64_t kMaxSplits = int64_t{1} << 16;

// Product of the non-negative entries of `dims`; false on overflow past kMaxElements.
bool known_product(const std::vector<int64_t>& dims, int64_t* out) {
  int64_t p = 1;
  for (int64_t d : dims) {
    if (d < 0) continue;
    if (d != 0 && p > kMaxElements / d) return false;
    p *= d;
  }
  *out = p;
  return true;
}

Status reshape_shape(ShapeContext& c) {
  Shape target = c.node().attr_shape("shape");
  if (!target.has_rank()) return c.error("attribute 'shape' must be a shape of known rank");
  int inferred = -1;
  for (int i = 0; i < target.rank(); ++i) {
    if (target.dim(i) < -1) return c.error("attribute 'shape' " + target.to_string() + " has a negative dim");
    if (target.dim(i) == -1) {
      if (inferred >= 0) return c.error("attribute 'shape' may have at most one -1, got " + ints_to_string(target.dims()));
      inferred = i;
    }
  }
  int64_t want = 0;
  if (!known_product(target.dims(), &want)) return c.error("attribute 'shape' " + target.to_string() + " is too large");
  const Shape& in = c.input_shape(0);
  auto mismatch = [&](const std::string& why) {
    return c.error("cannot reshape " + c.describe_input(0) + " to " + ints_to_string(target.dims()) + ": " + why);
  };
  if (in.is_fully_defined()) {
    int64_t n = 0;
    if (!known_product(in.dims(), &n)) return c.error("input " + c.describe_input(0) + " is too large");
    if (inferred < 0) {
      if (n != want)
        return mismatch(std::to_string(n) + " elements vs " + std::to_string(want));
    } else {
      if (want == 0) return mismatch("the -1 dim cannot be inferred when the other dims multiply to 0");
      if (n % want != 0)
        return mismatch(std::to_string(n) + " elements are not a multiple of " + std::to_string(want));
      target.set_dim(inferred, n / want);
    }
  } else if (in.has_rank()) {
    // What is known of the input still bounds the element count: it is a multiple of the
    // product of the known dims (zero if one of them is zero).
    int64_t known = 0;
    if (!known_product(in.dims(), &known)) return c.error("input " + c.describe_input(0) + " is too large");
    if (inferred < 0) {
      if (known == 0 && want != 0) return mismatch("the input has 0 elements");
      if (known > 0 && want % known != 0)
        return mismatch(std::to_string(want) + " elements are not a multiple of " + std::to_string(known));
    } else if (want == 0) {
      return mismatch("the -1 dim cannot be inferred when the other dims multiply to 0");
    }
  }
  c.set_output(0, c.input_dtype(0), target);
  return Status::OK();
}

Status transpose_shape(ShapeContext& c) {
  std::vector<int64_t> perm = c.node().attr_ints("perm");
  const Shape& in = c.input_shape(0);
  if (perm.empty()) {
    if (!in.has_rank()) {
      c.set_output(0, c.input_dtype(0), Shape::unknown_rank());
      return Status::OK();
    }
    for (int i = in.rank() - 1; i >= 0; --i) perm.push_back(i);
  }
  const int r = static_cast<int>(perm.size());
  if (in.has_rank() && in.rank() != r)
    return c.error("perm " + ints_to_string(perm) + " has " + std::to_string(r) + " entries but input " +
                   c.describe_input(0) + " has rank " + std::to_string(in.rank()));
  std::vector<bool> seen(perm.size(), false);
  for (int64_t p : perm) {
    if (p < 0 || p >= r || seen[static_cast<size_t>(p)])
      return c.error("perm " + ints_to_string(perm) + " is not a permutation of 0.." + std::to_string(r - 1));
    seen[static_cast<size_t>(p)] = true;
  }
  std::vector<int64_t> dims(perm.size(), -1);
  if (in.has_rank())
    for (int i = 0; i < r; ++i) dims[static_cast<size_t>(i)] = in.dim(static_cast<int>(perm[static_cast<size_t>(i)]));
  c.set_output(0, c.input_dtype(0), Shape(std::move(dims)));
  return Status::OK();
}

Status expand_dims_shape(ShapeContext& c) {
  const Shape& in = c.input_shape(0);
  if (!in.has_rank()) {
    c.set_output(0, c.input_dtype(0), Shape::unknown_rank());
    return Status::OK();
  }
  const int64_t axis = c.node().attr_int("axis");
  // The new dim may go anywhere in the rank+1 result, so -1 appends.
  const int64_t a = axis < 0 ? axis + in.rank() + 1 : axis;
  if (a < 0 || a > in.rank())
    return c.error("axis " + std::to_string(axis) + " is out of range for inserting a dim into " + c.describe_input(0));
  std::vector<int64_t> dims = in.dims();
  dims.insert(dims.begin() + a, 1);
  c.set_output(0, c.input_dtype(0), Shape(std::move(dims)));
  return Status::OK();
}

Status squeeze_shape(ShapeContext& c) {
  const Shape& in = c.input_shape(0);
  const std::vector<int64_t> axes = c.node().attr_ints("axes");
  if (!in.has_rank()) {
    c.set_output(0, c.input_dtype(0), Shape::unknown_rank());
    return Status::OK();
  }
  std::vector<bool> drop(static_cast<size_t>(in.rank()), false);
  if (axes.empty()) {
    for (int i = 0; i < in.rank(); ++i) {
      // An unknown dim may or may not be 1: the result's rank is unknown.
      if (in.dim(i) < 0) {
        c.set_output(0, c.input_dtype(0), Shape::unknown_rank());
        return Status::OK();
      }
      drop[static_cast<size_t>(i)] = in.dim(i) == 1;
    }
  }
  for (int64_t axis : axes) {
    int64_t a = 0;
    AF_RETURN_IF_ERROR(shape_fns::normalize_axis(c, axis, in.rank(), &a));
    if (in.dim(static_cast<int>(a)) >= 0 && in.dim(static_cast<int>(a)) != 1)
      return c.error("cannot squeeze axis " + std::to_string(axis) + " of " + c.describe_input(0) + ": its size is " +
                     std::to_string(in.dim(static_cast<int>(a))) + ", not 1");
    drop[static_cast<size_t>(a)] = true;
  }
  std::vector<int64_t> dims;
  for (int i = 0; i < in.rank(); ++i)
    if (!drop[static_cast<size_t>(i)]) dims.push_back(in.dim(i));
  c.set_output(0, c.input_dtype(0), Shape(std::move(dims)));
  return Status::OK();
}

Status concat_shape(ShapeContext& c) {
  const DType t = c.input_dtype(0);
  int rank = -1;
  int first_ranked = -1;
  for (int i = 0; i < c.num_inputs(); ++i) {
    if (c.input_dtype(i) != t)
      return c.error("input " + std::to_string(i) + " " + c.describe_input(i) + " has a different dtype than " +
                     c.describe_input(0));
    const Shape& s = c.input_shape(i);
    if (!s.has_rank()) continue;
    if (rank < 0) {
      rank = s.rank();
      first_ranked = i;
    } else if (s.rank() != rank) {
      return c.error("input " + std::to_string(i) + " " + c.describe_input(i) + " has rank " + std::to_string(s.rank()) +
                     " but " + c.describe_input(first_ranked) + " has rank " + std::to_string(rank));
    }
  }
  if (rank < 0) {
    c.set_output(0, t, Shape::unknown_rank());
    return Status::OK();
  }
  if (rank == 0) return c.error("cannot concatenate scalars, e.g. " + c.describe_input(first_ranked));
  int64_t axis = 0;
  AF_RETURN_IF_ERROR(shape_fns::normalize_axis(c, c.node().attr_int("axis"), rank, &axis));
  std::vector<int64_t> dims(static_cast<size_t>(rank), -1);
  std::vector<int> source(static_cast<size_t>(rank), -1);  // which input fixed each dim
  int64_t total = 0;
  bool any_unranked = false;
  for (int i = 0; i < c.num_inputs(); ++i) {
    const Shape& s = c.input_shape(i);
    if (!s.has_rank()) {
      any_unranked = true;
      continue;
    }
    for (int d = 0; d < rank; ++d) {
      const int64_t v = s.dim(d);
      if (d == axis) {
        if (v < 0 || total < 0) total = -1;
        else if (v > kMaxElements - total) return c.error("the concatenated dim is too large");
        else total += v;
        continue;
      }
      if (v < 0) continue;
      size_t k = static_cast<size_t>(d);
      if (dims[k] < 0) {
        dims[k] = v;
        source[k] = i;
      } else if (dims[k] != v) {
        return c.error("input " + std::to_string(i) + " " + c.describe_input(i) + " differs from " +
                       c.describe_input(source[k]) + " in dim " + std::to_string(d) + " (concatenating along axis " +
                       std::to_string(axis) + ")");
      }
    }
  }
  dims[static_cast<size_t>(axis)] = any_unranked ? -1 : total;
  c.set_output(0, t, Shape(std::move(dims)));
  return Status::OK();
}

// Shared by Split and SplitV: sets one output per entry of `sizes` (-1: unknown).
Status set_split_outputs(ShapeContext& c, int64_t axis, const std::vector<int64_t>& sizes) {
  const Shape& in = c.input_shape(0);
  for (size_t i = 0; i < sizes.size(); ++i) {
    Shape s = Shape::unknown_rank();
    if (in.has_rank()) {
      std::vector<int64_t> dims = in.dims();
      dims[static_cast<size_t>(axis)] = sizes[i];
      s = Shape(std::move(dims));
    }
    c.set_output(static_cast<int>(i), c.input_dtype(0), std::move(s));
  }
  return Status::OK();
}

Status split_shape(ShapeContext& c) {
  const int64_t num = c.node().attr_int("num_split");
  if (num < 1 || num > kMaxSplits)
    return c.error("attribute 'num_split' must be in [1, " + std::to_string(kMaxSplits) + "], got " + std::to_string(num));
  const Shape& in = c.input_shape(0);
  int64_t axis = 0, size = -1;
  if (in.has_rank()) {
    if (in.rank() == 0) return c.error("cannot split a scalar " + c.describe_input(0));
    AF_RETURN_IF_ERROR(shape_fns::normalize_axis(c, c.node().attr_int("axis"), in.rank(), &axis));
    const int64_t d = in.dim(static_cast<int>(axis));
    if (d >= 0) {
      if (d % num != 0)
        return c.error("dim " + std::to_string(axis) + " of " + c.describe_input(0) + " (" + std::to_string(d) +
                       ") is not divisible into " + std::to_string(num) + " equal parts");
      size = d / num;
    }
  }
  return set_split_outputs(c, axis, std::vector<int64_t>(static_cast<size_t>(num), size));
}

Status splitv_shape(ShapeContext& c) {
  std::vector<int64_t> sizes = c.node().attr_ints("sizes");
  if (sizes.empty() || static_cast<int64_t>(sizes.size()) > kMaxSplits)
    return c.error("attribute 'sizes' must have 1 to " + std::to_string(kMaxSplits) + " entries, got " +
                   std::to_string(sizes.size()));
  int inferred = -1;
  int64_t sum = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] < -1) return c.error("attribute 'sizes' " + ints_to_string(sizes) + " has a negative size");
    if (sizes[i] == -1) {
      if (inferred >= 0) return c.error("attribute 'sizes' " + ints_to_string(sizes) + " has more than one -1");
      inferred = static_cast<int>(i);
    } else if (sizes[i] > kMaxElements - sum) {
      return c.error("attribute 'sizes' " + ints_to_string(sizes) + " is too large");
    } else {
      sum += sizes[i];
    }
  }
  const Shape& in = c.input_shape(0);
  int64_t axis = 0;
  if (in.has_rank()) {
    if (in.rank() == 0) return c.error("cannot split a scalar " + c.describe_input(0));
    AF_RETURN_IF_ERROR(shape_fns::normalize_axis(c, c.node().attr_int("axis"), in.rank(), &axis));
    const int64_t d = in.dim(static_cast<int>(axis));
    if (d >= 0) {
      if (inferred >= 0 ? sum > d : sum != d)
        return c.error("sizes " + ints_to_string(sizes) + " do not add up to dim " + std::to_string(axis) + " of " +
                       c.describe_input(0) + " (" + std::to_string(d) + ")");
      if (inferred >= 0) sizes[static_cast<size_t>(inferred)] = d - sum;
    }
  }
  return set_split_outputs(c, axis, sizes);
}

Status slice_shape(ShapeContext& c) {
  const std::vector<int64_t> begin = c.node().attr_ints("begin");
  const std::vector<int64_t> size = c.node().attr_ints("size");
  if (begin.size() != size.size())
    return c.error("attributes 'begin' " + ints_to_string(begin) + " and 'size' " + ints_to_string(size) +
                   " have different lengths");
  const Shape& in = c.input_shape(0);
  const int r = static_cast<int>(begin.size());
  if (in.has_rank() && in.rank() != r)
    return c.error("'begin' and 'size' have " + std::to_string(r) + " entries but input " + c.describe_input(0) +
                   " has rank " + std::to_string(in.rank()));
  std::vector<int64_t> dims(begin.size(), -1);
  for (int i = 0; i < r; ++i) {
    const int64_t b = begin[static_cast<size_t>(i)], s = size[static_cast<size_t>(i)];
    if (b < 0 || s < -1 || b > kMaxElements || s > kMaxElements)
      return c.error("bad slice begin " + ints_to_string(begin) + " size " + ints_to_string(size) + " in dim " +
                     std::to_string(i));
    const int64_t d = in.has_rank() ? in.dim(i) : -1;
    if (d >= 0 && (b > d || (s >= 0 && b + s > d)))
      return c.error("slice begin " + ints_to_string(begin) + " size " + ints_to_string(size) + " is out of bounds of " +
                     c.describe_input(0) + " in dim " + std::to_string(i));
    dims[static_cast<size_t>(i)] = s >= 0 ? s : (d >= 0 ? d - b : -1);
  }
  c.set_output(0, c.input_dtype(0), Shape(std::move(dims)));
  return Status::OK();
}

}  // namespace

AF_REGISTER_OP("Reshape").inputs(1).required_attr("shape").shape_fn(reshape_shape);
AF_REGISTER_OP("Transpose").inputs(1).attr("perm", AttrValue::Ints{}).shape_fn(transpose_shape);
AF_REGISTER_OP("ExpandDims").inputs(1).required_attr("axis").shape_fn(expand_dims_shape);
AF_REGISTER_OP("Squeeze").inputs(1).attr("axes", AttrValue::Ints{}).shape_fn(squeeze_shape);
AF_REGISTER_OP("Concat").variadic_inputs(1).attr("axis", int64_t{0}).shape_fn(concat_shape);
AF_REGISTER_OP("Split").inputs(1).outputs(-1).required_attr("num_split").attr("axis", int64_t{0}).shape_fn(split_shape);
AF_REGISTER_OP("SplitV").inputs(1).outputs(-1).required_attr("sizes").attr("axis", int64_t{0}).shape_fn(splitv_shape);
AF_REGISTER_OP("Slice").inputs(1).required_attr("begin").required_attr("size").shape_fn(slice_shape);

}  // namespace actorflow
