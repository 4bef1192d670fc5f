// Host copies between a tensor and a slice of it along one axis: what a partitioned
// variable's shards are of the whole (their initial values, the Saver's whole tensor).
#pragma once
#include <cstdint>

#include "actorflow/tensor.h"

namespace actorflow {

// Rows [offset, offset + size) of `full` along `axis`, as a new tensor.
Tensor slice_along(const Tensor& full, int axis, int64_t offset, int64_t size);
// Writes `part` into `full` at `offset` along `axis`; every other dim must match.
void write_slice_along(const Tensor& part, int axis, int64_t offset, Tensor* full);

}  // namespace actorflow
