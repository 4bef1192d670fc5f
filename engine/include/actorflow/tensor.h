// Tensor: a dtype, a shape and a reference-counted, 64-byte aligned buffer tagged with
// its device. Copies share the buffer (cheap); clone() copies the data.
#pragma once
#include "actorflow/api.h"
#include <array>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <atomic>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "actorflow/allocator.h"
#include "actorflow/dtype.h"
#include "actorflow/shape.h"
#include "actorflow/status.h"

AF_PUBLIC_BEGIN

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

  // A variable's value. The kernels that write a variable's buffer in place (the
  // optimizers' applies, AssignAdd/AssignSub) count each write, so that something kept
  // from its contents (a kernel's bfloat16 copy of a weight) knows when it is stale.
  // Other buffers are not counted and nothing is kept from them.
  void mark_variable() { variable_.store(true, std::memory_order_release); }
  bool is_variable() const { return variable_.load(std::memory_order_acquire); }
  void note_write() { writes_.fetch_add(1, std::memory_order_acq_rel); }
  uint64_t writes() const { return writes_.load(std::memory_order_acquire); }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
  DeviceId device_;
  Allocator* alloc_ = nullptr;
  void (*release_)(void*, void*) = nullptr;
  void* release_arg_ = nullptr;
  int64_t string_count_ = 0;
  std::atomic<bool> variable_{false};
  std::atomic<uint64_t> writes_{0};
};

template <typename T, int N>
class TensorAccessor;

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

  // Nested initializer lists, up to rank 4: Tensor::from({{1.f, 2.f}, {3.f, 4.f}}) is
  // float32[2,2]. The dtype follows the element type, except that a double literal
  // gives float32 (as torch::tensor and TF1's constant do) unless `dtype` says
  // otherwise; a given dtype converts every element. Ragged lists throw.
  template <typename T>
  static Tensor from(std::initializer_list<T> v, DType dtype = DType::invalid);
  template <typename T>
  static Tensor from(std::initializer_list<std::initializer_list<T>> v, DType dtype = DType::invalid);
  template <typename T>
  static Tensor from(std::initializer_list<std::initializer_list<std::initializer_list<T>>> v,
                     DType dtype = DType::invalid);
  template <typename T>
  static Tensor from(
      std::initializer_list<std::initializer_list<std::initializer_list<std::initializer_list<T>>>> v,
      DType dtype = DType::invalid);

  // Wraps user memory (CPU, numeric or bool dtypes) without copying, like torch::from_blob.
  // `deleter` runs when the last tensor sharing it lets go; without one the caller keeps
  // the memory alive for as long as any tensor uses it. `data` must be aligned for dtype.
  static Tensor from_blob(void* data, Shape shape, DType dtype, std::function<void(void*)> deleter = {});

  bool valid() const { return dtype_ != DType::invalid; }
  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int rank() const { return shape_.rank(); }
  int64_t dim(int i) const { return shape_.dim(i); }
  int64_t num_elements() const { return num_elements_; }
  size_t bytes() const { return static_cast<size_t>(num_elements_) * dtype_size(dtype_); }
  DeviceId device() const;
  // "float32[2,3]"; "an empty Tensor (...)" when not valid().
  std::string type_string() const;

  // Untyped access: no checks (codecs, kernels that move bytes).
  void* raw_data() const;
  // Typed access: T must be the dtype's C++ type and the tensor valid(); otherwise
  // af::Error "expected float32 but the tensor is int64[]". An unsigned integer as wide
  // as the element (uint32_t for float32, uint8_t for bool) is accepted too, for the
  // kernels that move elements as bits.
  template <typename T> T* data() {
    check_access<T>();
    return static_cast<T*>(raw_data());
  }
  template <typename T> const T* data() const {
    check_access<T>();
    return static_cast<const T*>(raw_data());
  }
  // The single element of a one-element tensor (any rank).
  template <typename T> T item() const {
    check_access<T>();
    if (num_elements_ != 1) throw_not_one_element();
    return static_cast<const T*>(raw_data())[0];
  }
  template <typename T> std::vector<T> to_vector() const {
    const T* p = data<T>();
    return std::vector<T>(p, p + num_elements_);
  }
  // Element-wise views with bounds checks: t.accessor<float, 2>()(i, j), or the
  // shorthands vec<T>() and matrix<T>(). The rank must be N.
  template <typename T, int N> TensorAccessor<T, N> accessor();
  template <typename T, int N> TensorAccessor<const T, N> accessor() const;
  template <typename T> TensorAccessor<T, 1> vec() { return accessor<T, 1>(); }
  template <typename T> TensorAccessor<const T, 1> vec() const { return accessor<T, 1>(); }
  template <typename T> TensorAccessor<T, 2> matrix() { return accessor<T, 2>(); }
  template <typename T> TensorAccessor<const T, 2> matrix() const { return accessor<T, 2>(); }
  // Element i converted to double (numeric and bool dtypes).
  double element_as_double(int64_t i) const;

  // A tensor sharing this buffer with another shape of the same element count.
  Result<Tensor> reshaped(Shape shape) const;
  // Rows [begin, end) along dim 0 as a view sharing this buffer (writes show through
  // both); throws af::Error for a scalar or a range outside [0, dim(0)].
  Tensor slice_rows(int64_t begin, int64_t end) const;
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
  template <typename T>
  void check_access() const {
    if constexpr (requires { DTypeOf<T>::value; }) {
      if (dtype_ == DTypeOf<T>::value) [[likely]] return;
    }
    if constexpr (std::is_integral_v<T> && std::is_unsigned_v<T> && !std::is_same_v<T, bool>) {
      if (dtype_ != DType::string && dtype_ != DType::invalid && dtype_size(dtype_) == sizeof(T)) return;
    }
    if constexpr (requires { DTypeOf<T>::value; }) throw_dtype_mismatch(dtype_name(DTypeOf<T>::value));
    else throw_dtype_mismatch(std::to_string(sizeof(T)) + "-byte elements");
  }
  [[noreturn]] void throw_dtype_mismatch(const std::string& want) const;
  [[noreturn]] void throw_not_one_element() const;
  void check_rank(int n) const;
  template <typename T>
  static Tensor from_flat(const std::vector<T>& flat, std::vector<int64_t> dims, DType dtype);

  DType dtype_ = DType::invalid;
  Shape shape_;
  int64_t num_elements_ = 0;
  std::shared_ptr<Buffer> buffer_;
  size_t offset_ = 0;
};

// An N-d view of a tensor's elements (row-major); it does not keep the tensor alive.
template <typename T, int N>
class TensorAccessor {
 public:
  TensorAccessor(T* data, const std::vector<int64_t>& dims) : data_(data) {
    int64_t stride = 1;
    for (int d = N - 1; d >= 0; --d) {
      dims_[static_cast<size_t>(d)] = dims[static_cast<size_t>(d)];
      strides_[static_cast<size_t>(d)] = stride;
      stride *= dims[static_cast<size_t>(d)];
    }
  }
  template <typename... I>
  T& operator()(I... index) const {
    static_assert(sizeof...(I) == N, "an accessor of rank N takes N indices");
    const int64_t idx[] = {static_cast<int64_t>(index)...};
    int64_t off = 0;
    for (int d = 0; d < N; ++d) {
      const auto k = static_cast<size_t>(d);
      if (idx[k] < 0 || idx[k] >= dims_[k])
        throw Error(out_of_range("index " + std::to_string(idx[k]) + " is out of bounds for dimension " +
                                 std::to_string(d) + " with size " + std::to_string(dims_[k])));
      off += idx[k] * strides_[k];
    }
    return data_[off];
  }
  int64_t size(int d) const { return dims_[static_cast<size_t>(d)]; }
  T* data() const { return data_; }

 private:
  T* data_;
  std::array<int64_t, N> dims_{};
  std::array<int64_t, N> strides_{};
};

template <typename T, int N>
TensorAccessor<T, N> Tensor::accessor() {
  T* p = data<T>();
  check_rank(N);
  return TensorAccessor<T, N>(p, shape_.dims());
}

template <typename T, int N>
TensorAccessor<const T, N> Tensor::accessor() const {
  const T* p = data<T>();
  check_rank(N);
  return TensorAccessor<const T, N>(p, shape_.dims());
}

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

namespace detail {
// Appends the elements of a nested initializer list to `flat`, recording the size of
// each level in `dims` the first time and checking it every later time.
template <typename T>
void flatten_list(const T& v, size_t, std::vector<int64_t>&, std::vector<T>& flat) {
  flat.push_back(v);
}
template <typename T, typename E>
void flatten_list(std::initializer_list<E> v, size_t level, std::vector<int64_t>& dims, std::vector<T>& flat) {
  const auto n = static_cast<int64_t>(v.size());
  if (dims.size() == level) dims.push_back(n);
  else if (dims[level] != n)
    throw Error(invalid_argument("Tensor::from: ragged nested list: dimension " + std::to_string(level) + " has " +
                                 std::to_string(n) + " elements here but " + std::to_string(dims[level]) +
                                 " before"));
  for (const E& e : v) flatten_list<T>(e, level + 1, dims, flat);
}
template <typename T, typename L>
std::pair<std::vector<T>, std::vector<int64_t>> flatten_nested(L v, int rank) {
  std::vector<T> flat;
  std::vector<int64_t> dims;
  flatten_list<T>(v, 0, dims, flat);
  // An empty inner list leaves the deeper dims unrecorded: they are 0-sized.
  dims.resize(static_cast<size_t>(rank), 0);
  return {std::move(flat), std::move(dims)};
}
}  // namespace detail

template <typename T>
Tensor Tensor::from_flat(const std::vector<T>& flat, std::vector<int64_t> dims, DType dtype) {
  if constexpr (std::is_same_v<T, const char*>) {
    std::vector<std::string> s(flat.begin(), flat.end());
    return from_flat(s, std::move(dims), dtype);
  } else {
    DType inferred = std::is_same_v<T, double> ? DType::f32 : DTypeOf<T>::value;
    Tensor exact = from_vector(flat, Shape(std::move(dims)));
    DType want = dtype == DType::invalid ? inferred : dtype;
    if (want == exact.dtype()) return exact;
    if (!std::is_arithmetic_v<T> || (!is_numeric(want) && want != DType::boolean))
      throw Error(invalid_argument(std::string("Tensor::from: cannot make ") + dtype_name(want) + " from " +
                                   dtype_name(exact.dtype()) + " values"));
    Tensor t(want, exact.shape());
    for (int64_t i = 0; i < t.num_elements(); ++i) {
      double x = exact.element_as_double(i);
      visit_dtype(want, [&](auto tag) { static_cast<decltype(tag)*>(t.raw_data())[i] = static_cast<decltype(tag)>(x); });
    }
    return t;
  }
}

template <typename T>
Tensor Tensor::from(std::initializer_list<T> v, DType dtype) {
  auto [flat, dims] = detail::flatten_nested<T>(v, 1);
  return from_flat(flat, std::move(dims), dtype);
}
template <typename T>
Tensor Tensor::from(std::initializer_list<std::initializer_list<T>> v, DType dtype) {
  auto [flat, dims] = detail::flatten_nested<T>(v, 2);
  return from_flat(flat, std::move(dims), dtype);
}
template <typename T>
Tensor Tensor::from(std::initializer_list<std::initializer_list<std::initializer_list<T>>> v, DType dtype) {
  auto [flat, dims] = detail::flatten_nested<T>(v, 3);
  return from_flat(flat, std::move(dims), dtype);
}
template <typename T>
Tensor Tensor::from(
    std::initializer_list<std::initializer_list<std::initializer_list<std::initializer_list<T>>>> v, DType dtype) {
  auto [flat, dims] = detail::flatten_nested<T>(v, 4);
  return from_flat(flat, std::move(dims), dtype);
}

std::ostream& operator<<(std::ostream& os, const Tensor& t);

}  // namespace actorflow

AF_PUBLIC_END
