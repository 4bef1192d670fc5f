// Collective (all-reduce) training in the graph, as Horovod and TF's
// MultiWorkerMirroredStrategy write it: every process holds a replica of the variables,
// computes gradients on its own batch, and a CollectiveAllReduce node per bucket of
// gradients averages them over the group; each variable's apply op reads its bucket's
// output, so it fires as soon as that bucket is reduced while the backward pass goes on.
//
//   af::SessionOptions o;
//   o.collective_group = group;                   // net's Gloo group (actorflow/net/collective.h)
//   auto train = af::train::allreduce_minimize(opt, loss, step, {.bucket_bytes = 4 << 20});
//   auto sync = af::train::broadcast_variables(g); // everyone starts from rank 0's values
//
// The group itself is a runtime object (a CollectiveGroup) the session's kernels find
// among its resources; the graph only names what to reduce.
#pragma once
#include "actorflow/api.h"
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "actorflow/distributed.h"
#include "actorflow/graph.h"
#include "actorflow/optimizers.h"
#include "actorflow/resource_mgr.h"

AF_PUBLIC_BEGIN

namespace actorflow {

// The name under which a session's kernels find its SessionOptions::collective_group.
inline constexpr const char* kCollectiveGroupResource = "collective_group";

// A fixed group of processes (ranks 0..size-1) reducing tensors together. Every member
// runs the same collective ops in the same order; a group that failed once (a member
// lost, a timeout) fails every later op at once until its owner forms a new one.
class CollectiveGroup : public Resource {
 public:
  using Done = std::function<void(Status)>;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Sums `inputs` (f32 or f64, all of one dtype) over the group into `outputs` (same
  // dtypes and sizes, allocated by the caller), dividing by size() when `average`.
  // Outputs that are consecutive pieces of one buffer (gaps under 64 bytes) let a group
  // reduce there in place; the gaps are overwritten.
  // `bucket` of `num_buckets` of one step: every member reduces a step's buckets in the
  // order 0, 1, ..., num_buckets-1, whatever order they are started in here (Horovod's
  // rule: the same order on every rank). `done` runs once, on another thread, when the
  // outputs hold the result or with the error that ended it; it never blocks the caller.
  virtual void all_reduce(std::vector<Tensor> inputs, std::vector<Tensor> outputs, int bucket, int num_buckets,
                          bool average, Done done) = 0;
  // Copies rank 0's `inputs` into every member's `outputs` (any fixed-size dtypes).
  virtual void broadcast(std::vector<Tensor> inputs, std::vector<Tensor> outputs, Done done) = 0;
};

namespace train {

struct AllReduceOptions {
  // Gradients are grouped, in the order the backward pass produces them (the last
  // layer's first), into buckets of at least this many bytes; each bucket is one
  // all-reduce. 0: one bucket per gradient.
  int64_t bucket_bytes = 4 << 20;
  // Divide the sums by the group's size (the mean gradient: one process on the combined
  // batch).
  bool average = true;
};

// compute_gradients, one CollectiveAllReduce per bucket, apply_gradients: the train op
// (it also increments global_step, when valid). Sparse gradients are made dense first.
Operation allreduce_minimize(optim::Optimizer& opt, const Output& loss, const Output& global_step,
                             const AllReduceOptions& options = {}, const std::vector<Output>& var_list = {});
// The same with one optimizer per group of variables (wide & deep: FTRL for the wide part,
// Adagrad for the deep part; an empty var_list: every trainable variable): the buckets
// span every group; global_step moves once, after every group's update.
Operation allreduce_minimize(const std::vector<OptimizerVars>& parts, const Output& loss, const Output& global_step,
                             const AllReduceOptions& options = {});

// Sets each of `vars` (every global variable when empty: weights, optimizer slots and the
// global step) to rank 0's value, in one CollectiveBroadcast.
Operation broadcast_variables(Graph& g, const std::vector<Output>& vars = {});

// The gradient buckets allreduce_minimize made in `g` (for tests and traces): the names
// of each bucket's variables, in bucket order.
std::vector<std::vector<std::string>> allreduce_buckets(const Graph& g);

}  // namespace train
}  // namespace actorflow

AF_PUBLIC_END
