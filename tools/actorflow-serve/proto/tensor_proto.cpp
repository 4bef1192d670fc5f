#include "tensor_proto.h"

#include <algorithm>
#include <cstring>

namespace serve {

namespace af = actorflow;

tensorflow::DataType tf_dtype(af::DType t) {
  switch (t) {
    case af::DType::f32: return tensorflow::DT_FLOAT;
    case af::DType::f64: return tensorflow::DT_DOUBLE;
    case af::DType::i32: return tensorflow::DT_INT32;
    case af::DType::i64: return tensorflow::DT_INT64;
    case af::DType::u8: return tensorflow::DT_UINT8;
    case af::DType::boolean: return tensorflow::DT_BOOL;
    case af::DType::string: return tensorflow::DT_STRING;
    default: return tensorflow::DT_INVALID;
  }
}

void shape_to_proto(const af::Shape& shape, tensorflow::TensorShapeProto* out) {
  out->Clear();
  if (!shape.has_rank()) {
    out->set_unknown_rank(true);
    return;
  }
  for (int i = 0; i < shape.rank(); ++i) out->add_dim()->set_size(shape.dim(i));
}

namespace {

std::string shape_text(const af::Shape& s) {
  std::string t = "[";
  for (int i = 0; i < s.rank(); ++i) t += (i ? "," : "") + std::to_string(s.dim(i));
  return t + "]";
}

// Copies `n` values of a typed field into `out` as T, repeating the last one when the
// field is shorter (TensorFlow's rule); `count` values are in the field.
template <typename T, typename Field>
void fill(T* out, int64_t n, const Field& field) {
  int64_t count = field.size();
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<T>(field.Get(static_cast<int>(i < count ? i : count - 1)));
}

}  // namespace

af::Result<af::Tensor> tensor_from_proto(const tensorflow::TensorProto& proto, const TensorSpec& spec, int64_t max_bytes) {
  // The message is built only for a refusal: a Predict that is taken pays nothing for it.
  auto fail = [&](const std::string& what) {
    return af::invalid_argument("input '" + spec.name + "' expects " + af::dtype_name(spec.dtype) + " of shape " + shape_text(spec.shape) +
                                ": " + what);
  };
  if (proto.dtype() != tf_dtype(spec.dtype) || spec.dtype == af::DType::string)
    return fail("the request's tensor is " + tensorflow::DataType_Name(proto.dtype()) +
                (spec.dtype == af::DType::string ? " (string inputs are not taken)" : ""));
  const auto& ps = proto.tensor_shape();
  if (ps.unknown_rank()) return fail("the request's tensor has no shape (unknown_rank)");
  if (!spec.shape.has_rank() || ps.dim_size() != spec.shape.rank())
    return fail("the request's tensor has rank " + std::to_string(ps.dim_size()));
  std::vector<int64_t> dims;
  int64_t n = 1;
  for (int i = 0; i < ps.dim_size(); ++i) {
    int64_t d = ps.dim(i).size();
    if (d < 0 || (spec.shape.dim(i) >= 0 && d != spec.shape.dim(i)))
      return fail("the request's tensor has " + std::to_string(d) + " at dimension " + std::to_string(i));
    // A tensor this server holds in memory stays under 2^62 bytes: check before multiplying.
    if (d > 0 && n > (int64_t{1} << 40) / d) return fail("the request's tensor has too many elements");
    dims.push_back(d);
    n *= d;
  }
  if (dims.empty() || dims[0] < 1) return fail("the request's tensor has no rows");
  const size_t bytes = static_cast<size_t>(n) * af::dtype_size(spec.dtype);
  // Checked before the tensor is allocated: a typed field of one value fills any shape.
  if (bytes > static_cast<size_t>(std::max<int64_t>(0, max_bytes)))
    return fail("the request's tensor of " + std::to_string(n) + " values would take " + std::to_string(bytes) +
                " bytes, more than the " + std::to_string(max_bytes) + " a request may carry");
  af::Tensor t(spec.dtype, af::Shape(dims));
  if (!proto.tensor_content().empty()) {
    if (proto.tensor_content().size() != bytes)
      return fail("tensor_content holds " + std::to_string(proto.tensor_content().size()) + " bytes, not the " + std::to_string(bytes) +
                  " of " + std::to_string(n) + " values");
    std::memcpy(t.raw_data(), proto.tensor_content().data(), bytes);
    return t;
  }
  auto check_count = [&](int64_t count, const char* field) -> af::Status {
    if (count > n)
      return fail(std::string(field) + " holds " + std::to_string(count) + " values, more than the " + std::to_string(n) + " of its shape");
    if (count == 0) return fail(std::string("neither tensor_content nor ") + field + " holds a value");
    return af::Status::OK();
  };
  switch (spec.dtype) {
    case af::DType::f32:
      if (auto s = check_count(proto.float_val_size(), "float_val"); !s.ok()) return s;
      fill(t.data<float>(), n, proto.float_val());
      break;
    case af::DType::f64:
      if (auto s = check_count(proto.double_val_size(), "double_val"); !s.ok()) return s;
      fill(t.data<double>(), n, proto.double_val());
      break;
    case af::DType::i32:
      if (auto s = check_count(proto.int_val_size(), "int_val"); !s.ok()) return s;
      fill(t.data<int32_t>(), n, proto.int_val());
      break;
    case af::DType::u8:
      if (auto s = check_count(proto.int_val_size(), "int_val"); !s.ok()) return s;
      fill(t.data<uint8_t>(), n, proto.int_val());
      break;
    case af::DType::i64:
      if (auto s = check_count(proto.int64_val_size(), "int64_val"); !s.ok()) return s;
      fill(t.data<int64_t>(), n, proto.int64_val());
      break;
    case af::DType::boolean:
      if (auto s = check_count(proto.bool_val_size(), "bool_val"); !s.ok()) return s;
      fill(static_cast<bool*>(t.raw_data()), n, proto.bool_val());
      break;
    default: return fail("its dtype is not taken over gRPC");
  }
  return t;
}

af::Status tensor_to_proto(const af::Tensor& t, tensorflow::TensorProto* out) {
  out->Clear();
  out->set_dtype(tf_dtype(t.dtype()));
  shape_to_proto(t.shape(), out->mutable_tensor_shape());
  const int64_t n = t.num_elements();
  switch (t.dtype()) {
    case af::DType::f32: out->mutable_float_val()->Add(t.data<float>(), t.data<float>() + n); break;
    case af::DType::f64: out->mutable_double_val()->Add(t.data<double>(), t.data<double>() + n); break;
    case af::DType::i32: out->mutable_int_val()->Add(t.data<int32_t>(), t.data<int32_t>() + n); break;
    case af::DType::i64: out->mutable_int64_val()->Add(t.data<int64_t>(), t.data<int64_t>() + n); break;
    case af::DType::u8:
      for (int64_t i = 0; i < n; ++i) out->add_int_val(t.data<uint8_t>()[i]);
      break;
    case af::DType::boolean:
      for (int64_t i = 0; i < n; ++i) out->add_bool_val(t.element_as_double(i) != 0);
      break;
    default: return af::unimplemented(std::string("an output of dtype ") + af::dtype_name(t.dtype()) + " cannot be sent over gRPC");
  }
  return af::Status::OK();
}

}  // namespace serve
