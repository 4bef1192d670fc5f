#include "actorflow/tensor.h"

#include <cmath>
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <ostream>

namespace actorflow {

Buffer::Buffer(Allocator* alloc, size_t bytes) : bytes_(bytes), alloc_(alloc) {
  device_ = alloc->device();
  data_ = alloc->allocate(bytes);
  if (!data_) throw Error(Status(Code::resource_exhausted, "out of memory allocating " + std::to_string(bytes) + " bytes on " + device_.to_string()));
}

Buffer::Buffer(void* data, size_t bytes, DeviceId device, void (*release)(void*, void*), void* arg)
    : data_(data), bytes_(bytes), device_(device), release_(release), release_arg_(arg) {}

Buffer::~Buffer() {
  if (string_count_ > 0) {
    auto* s = static_cast<std::string*>(data_);
    for (int64_t i = 0; i < string_count_; ++i) s[i].~basic_string();
  }
  if (alloc_) alloc_->deallocate(data_, bytes_);
  else if (release_) release_(data_, release_arg_);
}

Tensor::Tensor(DType dtype, Shape shape, Allocator* alloc) : dtype_(dtype), shape_(std::move(shape)) {
  if (!shape_.is_fully_defined())
    throw Error(invalid_argument("cannot allocate a tensor of shape " + shape_.to_string() + ": not fully defined"));
  if (dtype == DType::invalid) throw Error(invalid_argument("cannot allocate a tensor of invalid dtype"));
  num_elements_ = shape_.num_elements();
  buffer_ = std::make_shared<Buffer>(alloc, bytes());
  if (dtype == DType::string) {
    auto* s = static_cast<std::string*>(buffer_->data());
    for (int64_t i = 0; i < num_elements_; ++i) new (&s[i]) std::string();
    buffer_->set_string_count(num_elements_);
  }
}

Tensor::Tensor(DType dtype, Shape shape, std::shared_ptr<Buffer> buffer, size_t offset)
    : dtype_(dtype), shape_(std::move(shape)), buffer_(std::move(buffer)), offset_(offset) {
  num_elements_ = shape_.num_elements();
}

Tensor Tensor::zeros(DType dtype, Shape shape) {
  Tensor t(dtype, std::move(shape));
  if (dtype != DType::string && t.bytes()) std::memset(t.raw_data(), 0, t.bytes());
  return t;
}

Tensor Tensor::filled(DType dtype, Shape shape, double value) {
  Tensor t(dtype, std::move(shape));
  int64_t n = t.num_elements();
  bool ok = visit_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    T v = static_cast<T>(value);
    T* p = t.data<T>();
    for (int64_t i = 0; i < n; ++i) p[i] = v;
  });
  if (!ok) throw Error(invalid_argument(std::string("Tensor::filled: unsupported dtype ") + dtype_name(dtype)));
  return t;
}

DeviceId Tensor::device() const { return buffer_ ? buffer_->device() : DeviceId{}; }

namespace {
// What from_blob hands Buffer as its release argument: the user's deleter, owned.
void run_deleter(void* data, void* arg) {
  auto* deleter = static_cast<std::function<void(void*)>*>(arg);
  if (*deleter) (*deleter)(data);
  delete deleter;
}
}  // namespace

Tensor Tensor::from_blob(void* data, Shape shape, DType dtype, std::function<void(void*)> deleter) {
  if (!is_numeric(dtype) && dtype != DType::boolean)
    throw Error(invalid_argument(std::string("Tensor::from_blob: dtype ") + dtype_name(dtype) +
                                 " cannot wrap raw memory (numeric and bool only)"));
  if (!shape.is_fully_defined())
    throw Error(invalid_argument("Tensor::from_blob: shape " + shape.to_string() + " is not fully defined"));
  const size_t bytes = static_cast<size_t>(shape.num_elements()) * dtype_size(dtype);
  if (!data && bytes > 0) throw Error(invalid_argument("Tensor::from_blob: null data for shape " + shape.to_string()));
  if (reinterpret_cast<uintptr_t>(data) % dtype_size(dtype) != 0)
    throw Error(invalid_argument(std::string("Tensor::from_blob: data is not aligned for ") + dtype_name(dtype)));
  auto* owned = new std::function<void(void*)>(std::move(deleter));
  auto buffer = std::make_shared<Buffer>(data, bytes, cpu_allocator()->device(), &run_deleter, owned);
  return Tensor(dtype, std::move(shape), std::move(buffer));
}

std::string Tensor::type_string() const {
  if (!valid()) return "an empty Tensor (default-constructed, or the result of fetching an operation)";
  return std::string(dtype_name(dtype_)) + shape_.to_string();
}

void Tensor::throw_dtype_mismatch(const std::string& want) const {
  throw Error(invalid_argument("expected " + want + " but the tensor is " + type_string()));
}

void Tensor::throw_not_one_element() const {
  throw Error(invalid_argument("expected a tensor with one element but the tensor is " + type_string() + " (" +
                               std::to_string(num_elements_) + " elements)"));
}

void Tensor::check_rank(int n) const {
  if (rank() != n)
    throw Error(invalid_argument("expected a tensor of rank " + std::to_string(n) + " but the tensor is " +
                                 type_string()));
}

Tensor Tensor::slice_rows(int64_t begin, int64_t end) const {
  if (!valid() || rank() < 1)
    throw Error(invalid_argument("slice_rows: expected a tensor of rank >= 1 but the tensor is " + type_string()));
  if (begin < 0 || begin > end || end > dim(0))
    throw Error(out_of_range("slice_rows: rows [" + std::to_string(begin) + ", " + std::to_string(end) +
                             ") are not within the " + std::to_string(dim(0)) + " rows of " + type_string()));
  std::vector<int64_t> dims = shape_.dims();
  int64_t row = 1;
  for (size_t d = 1; d < dims.size(); ++d) row *= dims[d];
  dims[0] = end - begin;
  return Tensor(dtype_, Shape(std::move(dims)), buffer_,
                offset_ + static_cast<size_t>(begin * row) * dtype_size(dtype_));
}

void* Tensor::raw_data() const {
  return buffer_ ? static_cast<char*>(buffer_->data()) + offset_ : nullptr;
}

double Tensor::element_as_double(int64_t i) const {
  double r = 0;
  visit_dtype(dtype_, [&](auto tag) {
    using T = decltype(tag);
    r = static_cast<double>(data<T>()[i]);
  });
  return r;
}

Result<Tensor> Tensor::reshaped(Shape shape) const {
  if (!shape.is_fully_defined() || shape.num_elements() != num_elements_)
    return invalid_argument("cannot reshape a tensor of shape " + shape_.to_string() + " (" +
                            std::to_string(num_elements_) + " elements) to " + shape.to_string());
  return Tensor(dtype_, std::move(shape), buffer_, offset_);
}

Tensor Tensor::clone() const {
  if (!valid()) return Tensor();
  Tensor t(dtype_, shape_);
  if (dtype_ == DType::string) {
    for (int64_t i = 0; i < num_elements_; ++i) t.data<std::string>()[i] = data<std::string>()[i];
  } else if (bytes()) {
    std::memcpy(t.raw_data(), raw_data(), bytes());
  }
  return t;
}

bool Tensor::equals(const Tensor& o) const {
  if (dtype_ != o.dtype_ || shape_ != o.shape_) return false;
  if (!valid()) return true;
  if (dtype_ == DType::string) {
    for (int64_t i = 0; i < num_elements_; ++i)
      if (data<std::string>()[i] != o.data<std::string>()[i]) return false;
    return true;
  }
  bool eq = true;
  visit_dtype(dtype_, [&](auto tag) {
    using T = decltype(tag);
    const T* a = data<T>();
    const T* b = o.data<T>();
    for (int64_t i = 0; i < num_elements_ && eq; ++i)
      if (!(a[i] == b[i])) eq = false;
  });
  return eq;
}

namespace {

std::string format_float(double v, bool f32) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  // Shortest representation that round-trips the stored precision.
  int prec = f32 ? 6 : 15;
  for (int p = 1; p <= (f32 ? 9 : 17); ++p) {
    std::snprintf(buf, sizeof buf, "%.*g", p, v);
    double back = std::strtod(buf, nullptr);
    if (f32 ? static_cast<float>(back) == static_cast<float>(v) : back == v) { prec = p; break; }
  }
  std::snprintf(buf, sizeof buf, "%.*g", prec, v);
  std::string s = buf;
  if (s.find_first_of(".en") == std::string::npos) s += ".";
  return s;
}

std::string format_element(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::f32: return format_float(t.data<float>()[i], true);
    case DType::f64: return format_float(t.data<double>()[i], false);
    case DType::i32: return std::to_string(t.data<int32_t>()[i]);
    case DType::i64: return std::to_string(t.data<int64_t>()[i]);
    case DType::u8: return std::to_string(t.data<uint8_t>()[i]);
    case DType::boolean: return t.data<bool>()[i] ? "True" : "False";
    case DType::string: return "'" + t.data<std::string>()[i] + "'";
    default: return "?";
  }
}

constexpr int64_t kSummarizeOver = 1000;
constexpr int64_t kEdgeItems = 3;

void print_rec(const Tensor& t, const std::vector<std::string>& elems, int dim, int64_t offset,
               int64_t stride_elems, bool summarize, size_t width, std::string& out) {
  int rank = t.rank();
  int64_t n = t.dim(dim);
  int64_t inner = stride_elems / (n == 0 ? 1 : n);
  out += "[";
  auto emit = [&](int64_t i, bool first) {
    if (dim == rank - 1) {
      if (!first) out += " ";
      std::string e = elems[static_cast<size_t>(offset + i)];
      if (e.size() < width) e = std::string(width - e.size(), ' ') + e;
      out += e;
    } else {
      if (!first) {
        out += "\n";
        for (int k = 0; k < rank - dim - 2; ++k) out += "\n";
        out += std::string(static_cast<size_t>(dim + 1), ' ');
      }
      print_rec(t, elems, dim + 1, offset + i * inner, inner, summarize, width, out);
    }
  };
  if (summarize && n > 2 * kEdgeItems) {
    for (int64_t i = 0; i < kEdgeItems; ++i) emit(i, i == 0);
    out += dim == rank - 1 ? " ..." : "\n" + std::string(static_cast<size_t>(dim + 1), ' ') + "...";
    for (int64_t i = n - kEdgeItems; i < n; ++i) emit(i, false);
  } else {
    for (int64_t i = 0; i < n; ++i) emit(i, i == 0);
  }
  out += "]";
}

}  // namespace

std::string Tensor::to_string() const {
  if (!valid()) return "<empty tensor>";
  if (rank() == 0) {
    if (dtype_ == DType::string) return data<std::string>()[0];
    return format_element(*this, 0);
  }
  // numpy prints any empty array as "[]"; walking the rows of a [huge, 0] tensor would not end.
  if (num_elements_ == 0) return "[]";
  bool summarize = num_elements_ > kSummarizeOver;
  std::vector<std::string> elems(static_cast<size_t>(num_elements_));
  for (int64_t i = 0; i < num_elements_; ++i) elems[static_cast<size_t>(i)] = format_element(*this, i);
  size_t width = 0;
  if (dtype_ == DType::f32 || dtype_ == DType::f64) {
    // numpy aligns floats on the decimal point: pad the integer part on the left and
    // the fraction on the right.
    bool plain = true;
    size_t int_w = 0, frac_w = 0;
    for (auto& e : elems) {
      size_t dot = e.find('.');
      if (dot == std::string::npos) { plain = false; break; }
      int_w = std::max(int_w, dot);
      frac_w = std::max(frac_w, e.size() - dot - 1);
    }
    if (plain) {
      for (auto& e : elems) {
        size_t dot = e.find('.');
        e = std::string(int_w - dot, ' ') + e + std::string(frac_w - (e.size() - dot - 1), ' ');
      }
    }
  }
  if (dtype_ != DType::string)
    for (auto& e : elems) width = std::max(width, e.size());
  std::string out;
  print_rec(*this, elems, 0, 0, num_elements_, summarize, width, out);
  return out;
}

std::string Tensor::debug_string() const {
  if (!valid()) return "<empty tensor>";
  return std::string(dtype_name(dtype_)) + shape_.to_string() + " " + to_string();
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << t.to_string(); }

}  // namespace actorflow
