// The C++ DSL: TF's data-flow ops, what a lookup across the shards of a partitioned
// variable is built from (ids split by shard, gathered on each, stitched back in order).
#pragma once
#include "actorflow/api.h"
#include <string>
#include <vector>

#include "actorflow/graph.h"

AF_PUBLIC_BEGIN

namespace actorflow {

// tf.dynamic_partition: `num_partitions` outputs; output i holds, in order, the slices
// data[j] (j over partitions' shape, a prefix of data's) whose partitions[j] == i.
// partitions is int32; a value outside [0, num_partitions) fails the step.
std::vector<Output> dynamic_partition(const Output& data, const Output& partitions, int64_t num_partitions,
                                      const std::string& name = "DynamicPartition");
// tf.dynamic_stitch: merged[indices[m][j]] = data[m][j], of shape [max index + 1] + the
// rows' shape; a later input wins on a repeated index, rows no index names are zero.
// indices are int32. Its gradient gathers the incoming gradient back for each data input.
Output dynamic_stitch(const std::vector<Output>& indices, const std::vector<Output>& data,
                      const std::string& name = "DynamicStitch");
// tf.range(start, limit, delta): int32 or int64 scalars of one dtype.
Output range(const Output& start, const Output& limit, const Output& delta, const std::string& name = "Range");

}  // namespace actorflow

AF_PUBLIC_END
