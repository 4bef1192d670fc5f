// Tensor: a dtype, a shape and a reference-counted, 64-byte aligned buffer tagged with
// its device. Copies share the buffer (cheap); clone() copies the data.
#pragma once
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "actorflow/allocator.h"
#include "actorflow/dtype.h"
#include "actorflow/shape.h"
#include "actorflow/status.h"

namespace actorflow {

// A block of device memory. For the string dtype the block holds std::string objects.
class Buffer {
 public:
  Buffer(Allocator* alloc, size_t bytes);
  // Wraps memory owned elsewhere; `release` is called when the last tensor lets go.
  Buffer(void* data, size_t bytes, DeviceId device, void (*release)(void* data, void* arg), void* arg);
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  void* data() const { return data_; }
  size_t size() const { return bytes_; }
  DeviceId device() const { return device_; }
  // Destroys `count` strings at data() before freeing (set for string buffers).
  void set_string_count(int64_t count) { string_count_ = count; }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
  DeviceId device_;
  Allocator* alloc_ = nullptr;
  void (*release_)(void*, void*) = nullptr;
  void* release_arg_ = nullptr;
  int64_t string_count_ = 0;
};

class Tensor {
 public:
  Tensor() = default;  // not valid(): no dtype, no buffer
  // Allocates an uninitialized tensor (strings are default-constructed). The shape must
  // be fully defined.
  Tensor(DType dtype, Shape shape, Allocator* alloc = cpu_allocator());
  static Tensor zeros(DType dtype, Shape shape);
  static Tensor filled(DType dtype, Shape shape, double value);

  template <typename T>
  static Tensor from_vector(const std::vector<T>& values, Shape shape);
  template <typename T>
  static Tensor from_vector(const std::vector<T>& values) {
    return from_vector(values, Shape{static_cast<int64_t>(values.size())});
  }
  template <typename T>
  static Tensor scalar(T value) { return from_vector(std::vector<T>{value}, Shape{}); }
  static Tensor scalar(const char* s) { return scalar(std::string(s)); }

  bool valid() const { return dtype_ != DType::invalid; }
  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int rank() const { return shape_.rank(); }
  int64_t dim(int i) const { return shape_.dim(i); }
  int64_t num_elements() const { return num_elements_; }
  size_t bytes() const { return static_cast<size_t>(num_elements_) * dtype_size(dtype_); }
  DeviceId device() const;

  void* raw_data() const;
  template <typename T> T* data() { return static_cast<T*>(raw_data()); }
  template <typename T> const T* data() const { return static_cast<const T*>(raw_data()); }
  // The single element of a one-element tensor.
  template <typename T> T item() const { return data<T>()[0]; }
  template <typename T> std::vector<T> to_vector() const {
    const T* p = data<T>();
    return std::vector<T>(p, p + num_elements_);
  }
  // Element i converted to double (numeric and bool dtypes).
  double element_as_double(int64_t i) const;

  // A tensor sharing this buffer with another shape of the same element count.
  Result<Tensor> reshaped(Shape shape) const;
  Tensor clone() const;
  const std::shared_ptr<Buffer>& buffer() const { return buffer_; }
  // How many tensors share the buffer (for copy-on-write of variables).
  long buffer_use_count() const { return buffer_.use_count(); }
  bool shares_buffer_with(const Tensor& o) const { return buffer_ && buffer_ == o.buffer_; }

  // Equal dtype, shape and values (NaN != NaN).
  bool equals(const Tensor& o) const;
  // numpy-style text, e.g. "[[1. 2.]\n [3. 4.]]"; long tensors are summarized with "...".
  std::string to_string() const;
  std::string debug_string() const;  // "f32[2,3] " + to_string()

  // Used by deserializers and views: a tensor over an existing buffer.
  Tensor(DType dtype, Shape shape, std::shared_ptr<Buffer> buffer, size_t offset = 0);

 private:
  DType dtype_ = DType::invalid;
  Shape shape_;
  int64_t num_elements_ = 0;
  std::shared_ptr<Buffer> buffer_;
  size_t offset_ = 0;
};

template <typename T>
Tensor Tensor::from_vector(const std::vector<T>& values, Shape shape) {
  Tensor t(DTypeOf<T>::value, std::move(shape));
  if (static_cast<int64_t>(values.size()) != t.num_elements())
    throw Error(invalid_argument("Tensor::from_vector: " + std::to_string(values.size()) +
                                 " values for shape " + t.shape().to_string()));
  if constexpr (std::is_same_v<T, std::string> || std::is_same_v<T, bool>) {
    T* p = t.data<T>();
    for (size_t i = 0; i < values.size(); ++i) p[i] = values[i];
  } else {
    if (!values.empty()) std::memcpy(t.raw_data(), values.data(), values.size() * sizeof(T));
  }
  return t;
}

std::ostream& operator<<(std::ostream& os, const Tensor& t);

}  // namespace actorflow
