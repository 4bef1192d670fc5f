#include "value_buffer.h"

#include <sys/mman.h>

#include <cstdlib>

namespace serve {

namespace af = actorflow;

namespace {

// Below this, malloc's small blocks are cheaper than a mapping and hold little.
constexpr size_t kMapFrom = 256 * 1024;

void release(void* data, size_t capacity, bool mapped) {
  if (!data) return;
  if (mapped) ::munmap(data, capacity);
  else std::free(data);
}

}  // namespace

ValueBuffer::ValueBuffer(size_t max_values, size_t value_bytes) {
  if (max_values == 0) return;
  ok_ = false;
  if (value_bytes != 0 && max_values > SIZE_MAX / 2 / value_bytes) return;
  size_t want = max_values * value_bytes;
  // A whole number of the tensors' alignment, as aligned_alloc asks.
  want = (want + af::kTensorAlignment - 1) / af::kTensorAlignment * af::kTensorAlignment;
  if (want >= kMapFrom) {
    void* p = ::mmap(nullptr, want, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return;
    data_ = p;
    mapped_ = true;
  } else {
    data_ = std::aligned_alloc(af::kTensorAlignment, want);
    if (!data_) return;
  }
  capacity_ = want;
  ok_ = true;
}

ValueBuffer::~ValueBuffer() { release(data_, capacity_, mapped_); }

af::Tensor ValueBuffer::take(af::DType dtype, af::Shape shape) {
  if (!data_) return af::Tensor(dtype, std::move(shape));  // no values: an empty tensor
  void* data = data_;
  size_t capacity = capacity_;
  bool mapped = mapped_;
  data_ = nullptr;
  capacity_ = size_ = 0;
  return af::Tensor::from_blob(data, std::move(shape), dtype, [capacity, mapped](void* p) { release(p, capacity, mapped); });
}

}  // namespace serve
