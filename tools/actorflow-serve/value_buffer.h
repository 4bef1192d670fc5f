// The input tensor's values as a reader finds them, written once, where the tensor will
// keep them: one block sized for the most values the body can hold, handed to the tensor
// at the end rather than copied. Only the pages written become resident, so a block
// sized for a 16 MiB body of "0," costs what the values take. Large blocks come straight
// from the kernel (mmap) and go back to it when the request's tensor is freed, rather
// than into the tensor pool or malloc's arenas, which keep what they are given.
#pragma once
#include <cstddef>
#include <cstring>

#include <actorflow/actorflow.h>

namespace serve {

class ValueBuffer {
 public:
  // Room for `max_values` values of `value_bytes` each; ok() is false when that much
  // memory could not be had.
  ValueBuffer(size_t max_values, size_t value_bytes);
  ~ValueBuffer();
  ValueBuffer(const ValueBuffer&) = delete;
  ValueBuffer& operator=(const ValueBuffer&) = delete;

  bool ok() const { return ok_; }
  // False when full (the caller sized the block for the body: a bug, not the client's).
  template <typename T>
  bool push(T x) {
    if (size_ + sizeof(T) > capacity_) return false;
    std::memcpy(static_cast<char*>(data_) + size_, &x, sizeof(T));
    size_ += sizeof(T);
    return true;
  }
  void clear() { size_ = 0; }
  size_t bytes() const { return size_; }

  // The values as a tensor of `shape`, which must hold exactly bytes(); the buffer is
  // empty afterwards.
  actorflow::Tensor take(actorflow::DType dtype, actorflow::Shape shape);

 private:
  void* data_ = nullptr;
  size_t capacity_ = 0;
  size_t size_ = 0;
  bool mapped_ = false;
  bool ok_ = true;
};

}  // namespace serve
