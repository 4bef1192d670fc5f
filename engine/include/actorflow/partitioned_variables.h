// Partitioned variables, as TF1 has them: get_variable with a partitioner makes one
// variable per shard, "<name>/part_0", "<name>/part_1", ..., each the slice of the whole
// along one axis, recorded as TF's save_slice_info (full name, full shape, offset, shape).
// The shards are ordinary variables: replica_device_setter spreads them over the ps tasks
// like any others, optimizers update each, and the Saver writes and restores the whole
// value under "<name>", so a checkpoint restores into any number of shards or into an
// unpartitioned variable of that name.
//
//   af::PartitionedVariable emb = af::get_variable(g, "emb", {10000, 64}, af::glorot_uniform(),
//                                                  af::fixed_size_partitioner(4));
//   af::Output rows = af::embedding_lookup(emb, ids, "div");  // gathers on each shard's device
#pragma once
#include "actorflow/api.h"
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "actorflow/graph.h"
#include "actorflow/variables.h"

AF_PUBLIC_BEGIN

namespace actorflow {

// TF's partitioner: from a variable's full shape and dtype, the number of parts along
// each dim (one per dim; at most one of them above 1).
using Partitioner = std::function<std::vector<int64_t>(const Shape& shape, DType dtype)>;

// tf.fixed_size_partitioner: min(num_shards, shape[axis]) parts along `axis`.
Partitioner fixed_size_partitioner(int64_t num_shards, int axis = 0);
// tf.min_max_variable_partitioner: as many parts along `axis` as give slices of at least
// min_slice_size bytes (ceil(total bytes / min_slice_size)), at least 1 and at most
// max_partitions and shape[axis]. A string element counts bytes_per_string_element.
Partitioner min_max_variable_partitioner(int64_t max_partitions = 1, int axis = 0, int64_t min_slice_size = 256 << 10,
                                         int64_t bytes_per_string_element = 16);

// TF's Variable.SaveSliceInfo: the part of the variable `full_name` a shard holds.
struct SaveSliceInfo {
  std::string full_name;
  std::vector<int64_t> full_shape;
  std::vector<int64_t> var_offset;
  std::vector<int64_t> var_shape;
  // TF's spec string, as its checkpoints record it: "10 4 0,4:0,4".
  std::string spec() const;
};
// The slice a variable holds when it is a shard of a partitioned variable, else nothing.
std::optional<SaveSliceInfo> save_slice_info(const Output& var);

// TF's PartitionedVariable: the shards of one variable, in order along its axis.
class PartitionedVariable {
 public:
  PartitionedVariable(std::string name, DType dtype, Shape shape, int axis, std::vector<Output> parts)
      : name_(std::move(name)), dtype_(dtype), shape_(std::move(shape)), axis_(axis), parts_(std::move(parts)) {}

  // The full name, "<variable scope>/<name>": what the Saver writes.
  const std::string& name() const { return name_; }
  DType dtype() const { return dtype_; }
  // The whole variable's shape.
  const Shape& shape() const { return shape_; }
  // The dim the variable is split along.
  int axis() const { return axis_; }
  // The shard variables (VariableV2 outputs), part_0 first.
  const std::vector<Output>& parts() const { return parts_; }
  int num_parts() const { return static_cast<int>(parts_.size()); }
  // TF's _get_partitions(): 1 for every dim but the axis, which has num_parts().
  std::vector<int64_t> partitions() const;
  // The whole value: the shards concatenated along the axis, a node named after the
  // variable outside any name scope (TF's as_tensor(); with one shard, its Identity).
  Output value() const;

 private:
  std::string name_;
  DType dtype_;
  Shape shape_;
  int axis_;
  std::vector<Output> parts_;
};

// tf.get_variable(..., partitioner=p): the variable "<variable scope>/<name>" made of the
// shards the partitioner asks for. Along the split axis of size n in k parts, the first
// n % k shards have n / k + 1 rows and the rest n / k (TF's split). Each shard is made
// and initialized where the device scope puts it; a random initializer draws each shard
// on its own, a Glorot one scales by the whole shape, a constant_initializer(tensor)
// gives each shard its slice of the tensor. Reuse follows get_variable: in a reusing scope
// the existing shards come back, and a different shape, dtype or number of parts fails.
PartitionedVariable get_variable(Graph& g, const std::string& name, Shape shape, const Initializer& init,
                                 const Partitioner& partitioner, bool trainable = true);

// tf.nn.embedding_lookup over shards: rows of the whole variable at `ids` (any shape, at
// most one unknown dim; int32 or int64), result ids.shape + the row shape, without
// assembling the variable. partition_strategy says which shard holds id i of p shards:
// "mod": shard i % p, row i / p; "div": the shards hold consecutive ranges, the first
// (n % p) of them one row longer (as the partitioners make them). Each shard's rows are
// gathered on its device and stitched back in the order of the ids, as TF does
// (dynamic_partition, gather, dynamic_stitch). The shards must be split along axis 0.
Output embedding_lookup(const PartitionedVariable& params, const Output& ids, const std::string& partition_strategy = "mod",
                        const std::string& name = "embedding_lookup");
// The same over a list of tensors or variables taken as the shards, as TF accepts one.
Output embedding_lookup(const std::vector<Output>& params, const Output& ids, const std::string& partition_strategy = "mod",
                        const std::string& name = "embedding_lookup");

}  // namespace actorflow

AF_PUBLIC_END
