// TF's data-flow ops for lookups across shards: DynamicPartition splits a tensor's rows
// by a partition index, DynamicStitch merges rows back by position, Range counts.
#include "actorflow/op_registry.h"
#include "common/fill_util.h"
#include "common/shape_fns.h"

namespace actorflow {
namespace {

// More outputs than this is a fuzzed or mistaken graph, not a sharded variable.
constexpr int64_t kMaxPartitions = 1 << 16;

Status dynamic_partition_shape(ShapeContext& c) {
  AF_RETURN_IF_ERROR(shape_fns::require_dtype(c, 1, {DType::i32}));
  const AttrValue* a = c.node().find_attr("num_partitions");
  if (!a || !a->is<int64_t>()) return c.error("attribute 'num_partitions' must be an integer");
  const int64_t n = a->get<int64_t>();
  if (n < 1 || n > kMaxPartitions)
    return c.error("num_partitions = " + std::to_string(n) + " must be in [1, " + std::to_string(kMaxPartitions) + "]");
  const Shape& data = c.input_shape(0);
  const Shape& parts = c.input_shape(1);
  Shape out = Shape::unknown_rank();
  if (data.has_rank() && parts.has_rank()) {
    if (parts.rank() > data.rank())
      return c.error("partitions " + c.describe_input(1) + " must be a prefix of data's shape " + c.describe_input(0));
    for (int i = 0; i < parts.rank(); ++i)
      if (parts.dim(i) >= 0 && data.dim(i) >= 0 && parts.dim(i) != data.dim(i))
        return c.error("partitions " + c.describe_input(1) + " must be a prefix of data's shape " +
                       c.describe_input(0));
    std::vector<int64_t> dims{Shape::kUnknown};
    dims.insert(dims.end(), data.dims().begin() + parts.rank(), data.dims().end());
    out = Shape(std::move(dims));
  }
  for (int64_t i = 0; i < n; ++i) c.set_output(static_cast<int>(i), c.input_dtype(0), out);
  return Status::OK();
}

Status dynamic_stitch_shape(ShapeContext& c) {
  const int n = c.num_inputs() / 2;
  if (c.num_inputs() % 2 != 0 || n < 1)
    return c.error("needs N indices and N data tensors, got " + std::to_string(c.num_inputs()) + " inputs");
  Shape rest = Shape::unknown_rank();
  bool rest_known = false;
  for (int i = 0; i < n; ++i) {
    AF_RETURN_IF_ERROR(shape_fns::require_dtype(c, i, {DType::i32}));
    if (c.input_dtype(n + i) != c.input_dtype(n))
      return c.error("data have different dtypes: " + c.describe_input(n) + " and " + c.describe_input(n + i));
    const Shape& idx = c.input_shape(i);
    const Shape& data = c.input_shape(n + i);
    if (!idx.has_rank() || !data.has_rank()) continue;
    if (idx.rank() > data.rank())
      return c.error("indices " + c.describe_input(i) + " must be a prefix of data's shape " + c.describe_input(n + i));
    for (int d = 0; d < idx.rank(); ++d)
      if (idx.dim(d) >= 0 && data.dim(d) >= 0 && idx.dim(d) != data.dim(d))
        return c.error("indices " + c.describe_input(i) + " must be a prefix of data's shape " +
                       c.describe_input(n + i));
    Shape r(std::vector<int64_t>(data.dims().begin() + idx.rank(), data.dims().end()));
    if (!rest_known) {
      rest = r;
      rest_known = true;
    } else if (!rest.merge(r, &rest)) {
      return c.error("data " + c.describe_input(n) + " and " + c.describe_input(n + i) + " have different row shapes");
    }
  }
  if (!rest_known) {
    c.set_output(0, c.input_dtype(n), Shape::unknown_rank());
    return Status::OK();
  }
  std::vector<int64_t> dims{Shape::kUnknown};
  dims.insert(dims.end(), rest.dims().begin(), rest.dims().end());
  c.set_output(0, c.input_dtype(n), Shape(std::move(dims)));
  return Status::OK();
}

Status range_shape(ShapeContext& c) {
  const DType t = c.input_dtype(0);
  AF_RETURN_IF_ERROR(shape_fns::require_dtype(c, 0, {DType::i32, DType::i64}));
  for (int i = 0; i < 3; ++i) {
    if (c.input_dtype(i) != t)
      return c.error("start, limit and delta must have one dtype, got " + c.describe_input(0) + " and " +
                     c.describe_input(i));
    const Shape& s = c.input_shape(i);
    if (s.has_rank() && s.rank() != 0) return c.error("input " + c.describe_input(i) + " must be a scalar");
  }
  c.set_output(0, t, Shape{Shape::kUnknown});
  return Status::OK();
}

}  // namespace

// tf.dynamic_partition: outputs[i] holds the slices data[j] whose partitions[j] == i, in
// order; partitions (int32) has a prefix of data's shape.
AF_REGISTER_OP("DynamicPartition").inputs(2).outputs(-1).required_attr("num_partitions").shape_fn(dynamic_partition_shape);
// tf.dynamic_stitch: inputs indices[0..N), data[0..N); merged[indices[m][i]] = data[m][i],
// later inputs winning on a repeated index; rows no index names are zero.
AF_REGISTER_OP("DynamicStitch").variadic_inputs(2).shape_fn(dynamic_stitch_shape);
// tf.range(start, limit, delta) of int32 or int64 scalars.
AF_REGISTER_OP("Range").inputs(3).shape_fn(range_shape);

}  // namespace actorflow
