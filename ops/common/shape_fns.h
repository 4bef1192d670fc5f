// Shape-function building blocks shared by op definitions.
#pragma once
#include "actorflow/op_registry.h"

namespace actorflow::shape_fns {

// Output 0 = input 0 (dtype and shape).
Status unchanged(ShapeContext& c);
// MatMul's output from inputs 0 and 1 and the transpose_a/transpose_b attributes: the
// product of the last two dims with numpy-broadcast batch dims (ops/defs/matmul_ops.cpp).
Status matmul_shape(ShapeContext& c);
// Output 0: the numpy broadcast of inputs 0 and 1, which must share a dtype. The result
// dtype is `out` (DType::invalid: the inputs' dtype).
Status broadcast_binary(ShapeContext& c, DType out = DType::invalid);
// Requires input i to have one of the given dtypes.
Status require_dtype(ShapeContext& c, int i, std::initializer_list<DType> allowed);
// Maps a possibly negative axis into [0, rank); error names the node.
Status normalize_axis(const ShapeContext& c, int64_t axis, int rank, int64_t* out);
// Output shape of a reduction of `in` over `axes` (empty = all).
Status reduced_shape(const ShapeContext& c, const Shape& in, const std::vector<int64_t>& axes, bool keepdims, Shape* out);

}  // namespace actorflow::shape_fns
