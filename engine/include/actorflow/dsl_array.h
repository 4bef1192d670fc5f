// The C++ DSL, part 3: shape manipulation, indexing and data movement.
#pragma once
#include "actorflow/api.h"
#include <string>
#include <vector>

#include "actorflow/graph.h"

AF_PUBLIC_BEGIN

namespace actorflow {

// One dim may be -1 (inferred from the element count).
Output reshape(const Output& x, Shape shape, const std::string& name = "Reshape");
// perm empty: reverse the dims.
Output transpose(const Output& x, std::vector<int64_t> perm = {}, const std::string& name = "Transpose");
Output expand_dims(const Output& x, int64_t axis, const std::string& name = "ExpandDims");
// axes empty: every dim of size 1.
Output squeeze(const Output& x, std::vector<int64_t> axes = {}, const std::string& name = "Squeeze");
Output concat(const std::vector<Output>& xs, int64_t axis, const std::string& name = "Concat");
// Into `num` equal parts along axis.
std::vector<Output> split(const Output& x, int64_t num, int64_t axis, const std::string& name = "Split");
// Into parts of the given sizes along axis.
std::vector<Output> split(const Output& x, std::vector<int64_t> sizes, int64_t axis, const std::string& name = "SplitV");
// size -1 in a dim: to the end.
Output slice(const Output& x, std::vector<int64_t> begin, std::vector<int64_t> size, const std::string& name = "Slice");
// Rows of params (along axis) at integer indices; indices' shape replaces that axis.
Output gather(const Output& params, const Output& indices, int64_t axis = 0, const std::string& name = "Gather");
Output one_hot(const Output& indices, int64_t depth, double on_value = 1, double off_value = 0,
               DType dtype = DType::f32, const std::string& name = "OneHot");
Output tile(const Output& x, std::vector<int64_t> multiples, const std::string& name = "Tile");
// paddings: one (before, after) pair per dim.
Output pad(const Output& x, std::vector<std::pair<int64_t, int64_t>> paddings, double value = 0,
           const std::string& name = "Pad");

}  // namespace actorflow

AF_PUBLIC_END
