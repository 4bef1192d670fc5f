#include "core/tensor_slices.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

namespace actorflow {
namespace {

// The whole tensor is `outer` blocks of dim(axis) * `inner` elements; a slice takes a
// contiguous run of `size` * inner elements out of each block.
void copy_blocks(const Tensor& src, int64_t src_rows, int64_t src_row0, Tensor* dst, int64_t dst_rows, int64_t dst_row0,
                 int64_t rows, int64_t outer, int64_t inner) {
  if (src.dtype() == DType::string) {
    const std::string* s = src.data<std::string>();
    std::string* d = dst->data<std::string>();
    for (int64_t o = 0; o < outer; ++o)
      std::copy_n(s + (o * src_rows + src_row0) * inner, rows * inner, d + (o * dst_rows + dst_row0) * inner);
    return;
  }
  const size_t elem = dtype_size(src.dtype());
  const char* s = static_cast<const char*>(src.raw_data());
  char* d = static_cast<char*>(dst->raw_data());
  const size_t run = static_cast<size_t>(rows * inner) * elem;
  if (run == 0) return;
  for (int64_t o = 0; o < outer; ++o)
    std::memcpy(d + static_cast<size_t>((o * dst_rows + dst_row0) * inner) * elem,
                s + static_cast<size_t>((o * src_rows + src_row0) * inner) * elem, run);
}

void outer_inner(const Shape& s, int axis, int64_t* outer, int64_t* inner) {
  *outer = 1;
  *inner = 1;
  for (int i = 0; i < axis; ++i) *outer *= s.dim(i);
  for (int i = axis + 1; i < s.rank(); ++i) *inner *= s.dim(i);
}

}  // namespace

Tensor slice_along(const Tensor& full, int axis, int64_t offset, int64_t size) {
  if (axis < 0 || axis >= full.rank() || offset < 0 || size < 0 || offset + size > full.dim(axis))
    throw Error(invalid_argument("slice_along: rows [" + std::to_string(offset) + ", " + std::to_string(offset + size) +
                                 ") of axis " + std::to_string(axis) + " are not in " + full.shape().to_string()));
  std::vector<int64_t> dims = full.shape().dims();
  dims[static_cast<size_t>(axis)] = size;
  Tensor part(full.dtype(), Shape(std::move(dims)));
  int64_t outer, inner;
  outer_inner(full.shape(), axis, &outer, &inner);
  copy_blocks(full, full.dim(axis), offset, &part, size, 0, size, outer, inner);
  return part;
}

void write_slice_along(const Tensor& part, int axis, int64_t offset, Tensor* full) {
  bool fits = part.dtype() == full->dtype() && part.rank() == full->rank() && axis >= 0 && axis < full->rank() &&
              offset >= 0 && offset + part.dim(axis) <= full->dim(axis);
  for (int i = 0; fits && i < full->rank(); ++i) fits = i == axis || part.dim(i) == full->dim(i);
  if (!fits)
    throw Error(invalid_argument("write_slice_along: a " + part.type_string() + " does not fit " + full->type_string() +
                                 " at row " + std::to_string(offset) + " of axis " + std::to_string(axis)));
  int64_t outer, inner;
  outer_inner(full->shape(), axis, &outer, &inner);
  copy_blocks(part, part.dim(axis), 0, full, full->dim(axis), offset, part.dim(axis), outer, inner);
}

}  // namespace actorflow
