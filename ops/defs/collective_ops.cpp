// Collective ops of all-reduce training (actorflow/collective.h): a bucket of gradients
// summed (and averaged) over a group of processes, and rank 0's values copied to every
// member. Their kernels (ops/cpu/collective_kernels.cpp) are async: they hand the
// tensors to the session's CollectiveGroup and finish when it calls back.
#include "actorflow/op_registry.h"

namespace actorflow {
namespace {

Status same_as_inputs(ShapeContext& c, bool floats_only) {
  for (int i = 0; i < c.num_inputs(); ++i) {
    DType d = c.input_dtype(i);
    if (floats_only && d != DType::f32 && d != DType::f64)
      return c.error("all-reduce sums float32 or float64 tensors, got " + c.describe_input(i));
    if (floats_only && d != c.input_dtype(0))
      return c.error("one bucket holds one dtype: " + c.describe_input(0) + " and " + c.describe_input(i));
    if (d == DType::string || d == DType::invalid) return c.error("cannot send " + c.describe_input(i));
    c.set_output(i, d, c.input_shape(i));
  }
  return Status::OK();
}

}  // namespace

// (tensors...) -> their sums over the group (means when `average`), one output per
// input. `bucket` of `num_buckets`: the group reduces a step's buckets in that order.
AF_REGISTER_OP("CollectiveAllReduce")
    .variadic_inputs(1)
    .outputs(-1)
    .stateful()
    .attr("bucket", int64_t{0})
    .attr("num_buckets", int64_t{1})
    .attr("average", true)
    .shape_fn([](ShapeContext& c) {
      int64_t b = c.node().attr_int("bucket", 0), n = c.node().attr_int("num_buckets", 1);
      if (n < 1 || b < 0 || b >= n)
        return c.error("bucket " + std::to_string(b) + " of " + std::to_string(n) + " is not a bucket");
      return same_as_inputs(c, true);
    });

// (tensors...) -> rank 0's values of them, on every member.
AF_REGISTER_OP("CollectiveBroadcast").variadic_inputs(1).outputs(-1).stateful().shape_fn([](ShapeContext& c) {
  return same_as_inputs(c, false);
});

}  // namespace actorflow
