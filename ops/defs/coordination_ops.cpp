// Ops of distributed training that keep state beside the variables on a ps task:
//  - sync replicas (TF's SyncReplicasOptimizer, without its token queue): a gradient
//    accumulator per variable and a round barrier the workers wait on;
//  - bounded staleness (ps-lite's / Petuum's SSP) and the end of training: a clock per
//    worker.
// The kernels (ops/cpu/coordination_kernels.cpp) keep this state as resources of the
// task's ResourceMgr, so the sessions of every worker that share the ps's container
// (SessionOptions::shared_container) meet in it.
#include "actorflow/op_registry.h"

namespace actorflow {
namespace {

Status scalar_i64_input(ShapeContext& c, int i, const char* what) {
  if (c.input_dtype(i) != DType::i64 || !c.input_shape(i).compatible_with(Shape{}))
    return c.error(std::string(what) + " must be an int64 scalar, got " + c.describe_input(i));
  return Status::OK();
}

Status need_name(ShapeContext& c, const char* key) {
  if (c.node().attr_string(key).empty()) return c.error(std::string("attribute '") + key + "' must name the shared state");
  return Status::OK();
}

// A deposit into an accumulator: (local_step, gradient), or the sparse form (local_step,
// values [k, ...row], indices [k]).
OpDefBuilder apply_gradient_op(const char* name, bool sparse) {
  return OpDefBuilder(name)
      .inputs(sparse ? 3 : 2)
      .outputs(0)
      .stateful()
      .required_attr("accumulator")
      .attr("worker", int64_t{0})
      .shape_fn([sparse](ShapeContext& c) {
        AF_RETURN_IF_ERROR(need_name(c, "accumulator"));
        AF_RETURN_IF_ERROR(scalar_i64_input(c, 0, "local_step"));
        if (c.input_dtype(1) != DType::f32 && c.input_dtype(1) != DType::f64)
          return c.error("the gradient must be float32 or float64, got " + c.describe_input(1));
        if (!sparse) return Status::OK();
        if (c.input_dtype(2) != DType::i32 && c.input_dtype(2) != DType::i64)
          return c.error("the gradient's indices must be int32 or int64, got " + c.describe_input(2));
        if (!c.input_shape(2).compatible_with(Shape{-1}))
          return c.error("the gradient's indices must be a vector, got " + c.describe_input(2));
        return Status::OK();
      });
}

// A take from an accumulator: (round) -> the mean, or the sparse form's (indices int64
// [u] ascending, values [u, ...row]) with `shape` the variable's.
OpDefBuilder take_gradient_op(const char* name, bool sparse) {
  return OpDefBuilder(name)
      .inputs(1)
      .outputs(sparse ? 2 : 1)
      .stateful()
      .required_attr("accumulator")
      .required_attr("dtype")
      .required_attr("shape")
      .attr("num_required", int64_t{1})
      .attr("timeout_ms", int64_t{60000})
      .attr("grace_ms", int64_t{200})
      .shape_fn([sparse](ShapeContext& c) {
        AF_RETURN_IF_ERROR(need_name(c, "accumulator"));
        AF_RETURN_IF_ERROR(scalar_i64_input(c, 0, "round"));
        if (c.node().attr_int("num_required", 1) < 1) return c.error("num_required must be at least 1");
        const Shape var = c.node().attr_shape("shape");
        if (!sparse) {
          c.set_output(0, c.node().attr_dtype("dtype"), var);
          return Status::OK();
        }
        if (!var.has_rank() || var.rank() < 1)
          return c.error("a sparse gradient needs a variable of rank >= 1, got " + var.to_string());
        std::vector<int64_t> rows = var.dims();
        rows[0] = -1;
        c.set_output(0, DType::i64, Shape{-1});
        c.set_output(1, c.node().attr_dtype("dtype"), Shape(rows));
        return Status::OK();
      });
}

// (local_step, gradient): adds the gradient to the accumulator unless it was computed
// for a round that has been applied already (then it is dropped and counted as stale).
OpRegistrar apply_gradient_registrar = apply_gradient_op("AccumulatorApplyGradient", false);
// The sparse form, as TF's SparseConditionalAccumulator takes IndexedSlices: the rows are
// summed by index.
OpRegistrar sparse_apply_gradient_registrar = apply_gradient_op("SparseAccumulatorApplyGradient", true);

// (round) -> the mean of the gradients of that round, once `num_required` have arrived;
// the accumulator then accepts round + 1 only. After `timeout_ms` it takes what has
// arrived (at least one), logs which workers were missing, and until all come back the
// later rounds wait only `grace_ms` beyond the gradients still arriving.
OpRegistrar take_gradient_registrar = take_gradient_op("AccumulatorTakeGradient", false);
// The sparse form: each row any gradient of the round touched, its sum divided by the
// number of gradients taken.
OpRegistrar sparse_take_gradient_registrar = take_gradient_op("SparseAccumulatorTakeGradient", true);

}  // namespace

// (round): the round the chief has finished applying; wakes the workers waiting for it.
AF_REGISTER_OP("SyncRoundAdvance").inputs(1).outputs(0).stateful().required_attr("barrier").shape_fn([](ShapeContext& c) {
  AF_RETURN_IF_ERROR(need_name(c, "barrier"));
  return scalar_i64_input(c, 0, "round");
});

// (local_step) -> the barrier's round once it is past local_step, the step this worker
// computes next. Fails after timeout_ms naming the round it waited for.
AF_REGISTER_OP("SyncRoundWait")
    .inputs(1)
    .stateful()
    .required_attr("barrier")
    .attr("timeout_ms", int64_t{60000})
    .shape_fn([](ShapeContext& c) {
      AF_RETURN_IF_ERROR(need_name(c, "barrier"));
      AF_RETURN_IF_ERROR(scalar_i64_input(c, 0, "local_step"));
      c.set_output(0, DType::i64, Shape{});
      return Status::OK();
    });

// (clock) -> the slowest worker's clock: records that `worker` finished clock `clock`,
// then waits until every worker still training has reached clock - staleness.
AF_REGISTER_OP("WorkerClock")
    .inputs(1)
    .stateful()
    .required_attr("table")
    .required_attr("worker")
    .required_attr("num_workers")
    .attr("staleness", int64_t{0})
    .attr("timeout_ms", int64_t{60000})
    .shape_fn([](ShapeContext& c) {
      AF_RETURN_IF_ERROR(need_name(c, "table"));
      AF_RETURN_IF_ERROR(scalar_i64_input(c, 0, "clock"));
      int64_t n = c.node().attr_int("num_workers"), w = c.node().attr_int("worker", -1);
      if (n < 1 || w < 0 || w >= n) return c.error("worker must be in [0, num_workers)");
      if (c.node().attr_int("staleness") < 0) return c.error("staleness must be at least 0");
      c.set_output(0, DType::i64, Shape{});
      return Status::OK();
    });

// Marks `worker` finished: nobody waits for its clock any more.
AF_REGISTER_OP("WorkerDone")
    .inputs(0)
    .outputs(0)
    .stateful()
    .required_attr("table")
    .required_attr("worker")
    .required_attr("num_workers")
    .shape_fn([](ShapeContext& c) { return need_name(c, "table"); });

// -> how many workers have finished, once all have or at timeout_ms (the caller decides
// what a missing worker means).
AF_REGISTER_OP("WaitWorkersDone")
    .inputs(0)
    .stateful()
    .required_attr("table")
    .required_attr("num_workers")
    .attr("timeout_ms", int64_t{60000})
    .shape_fn([](ShapeContext& c) {
      AF_RETURN_IF_ERROR(need_name(c, "table"));
      c.set_output(0, DType::i64, Shape{});
      return Status::OK();
    });

// -> int64 [n, 3]: every clock a worker reported, in order, as (worker, clock, the
// slowest worker's clock when it went on); and the stale gradients dropped, when asked.
AF_REGISTER_OP("WorkerClockLog").inputs(0).stateful().required_attr("table").shape_fn([](ShapeContext& c) {
  AF_RETURN_IF_ERROR(need_name(c, "table"));
  c.set_output(0, DType::i64, Shape{-1, 3});
  return Status::OK();
});

// -> int64 scalar: the gradients the accumulator dropped because they were stale.
AF_REGISTER_OP("AccumulatorNumStale").inputs(0).stateful().required_attr("accumulator").shape_fn([](ShapeContext& c) {
  AF_RETURN_IF_ERROR(need_name(c, "accumulator"));
  c.set_output(0, DType::i64, Shape{});
  return Status::OK();
});

}  // namespace actorflow
