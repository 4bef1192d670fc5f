// actorflow-serve's TensorProto <-> Tensor conversion (tools/actorflow-serve/proto/
// tensor_proto.cpp), as a gRPC Predict uses it: tensor_content and typed fields in,
// TensorFlow's rule that a short typed field repeats its last value, every refusal naming
// the input, and typed fields out for each dtype the server answers with.
#include <doctest/doctest.h>

#include "interop/skip.h"

namespace {
[[maybe_unused]] const char* kNotBuilt =
    "actorflow-serve's gRPC parts are not built (libgrpc++-dev, libprotobuf-dev, protobuf-compiler-grpc missing)";
}

#if AF_SERVE_GRPC
#include <cstring>

#include "proto/tensor_proto.h"

namespace af = actorflow;
using serve::TensorSpec;

namespace {

// What the largest request may carry, as actorflow-serve passes --max_body_bytes (1 MiB).
constexpr int64_t kLimit = int64_t{1} << 20;

tensorflow::TensorProto proto(tensorflow::DataType dtype, std::vector<int64_t> dims) {
  tensorflow::TensorProto p;
  p.set_dtype(dtype);
  for (auto d : dims) p.mutable_tensor_shape()->add_dim()->set_size(d);
  return p;
}

std::string error_of(const tensorflow::TensorProto& p, const TensorSpec& spec) {
  auto t = serve::tensor_from_proto(p, spec, kLimit);
  if (t.ok()) return "";
  CHECK(t.status().code() == af::Code::invalid_argument);
  return t.status().message();
}

}  // namespace
#endif

TEST_CASE("needs protobuf: a TensorProto becomes the input tensor, or an error naming the input") {
#if !AF_SERVE_GRPC
  aft::skip(kNotBuilt);
#else
  const TensorSpec spec{"x", af::DType::f32, af::Shape({-1, 3})};

  // tensor_content: raw little-endian values.
  auto p = proto(tensorflow::DT_FLOAT, {2, 3});
  std::vector<float> v = {1, 2, 3, 4, 5, 6};
  p.set_tensor_content(std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float)));
  auto t = serve::tensor_from_proto(p, spec, kLimit);
  REQUIRE_MESSAGE(t.ok(), t.status().to_string());
  CHECK(t->shape() == af::Shape({2, 3}));
  CHECK(t->to_vector<float>() == v);

  // float_val: all values, or fewer whose last one repeats (TensorFlow's rule).
  auto q = proto(tensorflow::DT_FLOAT, {2, 3});
  for (float x : {1.f, 2.f, 3.f, 4.f, 5.f, 6.f}) q.add_float_val(x);
  CHECK(serve::tensor_from_proto(q, spec, kLimit)->to_vector<float>() == v);
  auto r = proto(tensorflow::DT_FLOAT, {2, 3});
  r.add_float_val(7);
  r.add_float_val(8);
  CHECK(serve::tensor_from_proto(r, spec, kLimit)->to_vector<float>() == std::vector<float>{7, 8, 8, 8, 8, 8});

  // Refusals, each naming the input and what it expects.
  auto too_many = proto(tensorflow::DT_FLOAT, {1, 3});
  for (int i = 0; i < 4; ++i) too_many.add_float_val(1);
  CHECK(error_of(too_many, spec).find("float_val holds 4 values, more than the 3") != std::string::npos);
  CHECK(error_of(proto(tensorflow::DT_FLOAT, {1, 3}), spec).find("neither tensor_content nor float_val") != std::string::npos);
  auto short_content = proto(tensorflow::DT_FLOAT, {1, 3});
  short_content.set_tensor_content("abc");
  CHECK(error_of(short_content, spec).find("tensor_content holds 3 bytes, not the 12") != std::string::npos);
  auto wrong_dtype = proto(tensorflow::DT_DOUBLE, {1, 3});
  wrong_dtype.add_double_val(1);
  CHECK(error_of(wrong_dtype, spec) == "input 'x' expects float32 of shape [-1,3]: the request's tensor is DT_DOUBLE");
  auto wrong_dim = proto(tensorflow::DT_FLOAT, {1, 4});
  wrong_dim.add_float_val(1);
  CHECK(error_of(wrong_dim, spec).find("has 4 at dimension 1") != std::string::npos);
  auto wrong_rank = proto(tensorflow::DT_FLOAT, {3});
  wrong_rank.add_float_val(1);
  CHECK(error_of(wrong_rank, spec).find("has rank 1") != std::string::npos);
  auto no_rows = proto(tensorflow::DT_FLOAT, {0, 3});
  CHECK(error_of(no_rows, spec).find("no rows") != std::string::npos);
  auto negative = proto(tensorflow::DT_FLOAT, {-1, 3});
  CHECK(error_of(negative, spec).find("has -1 at dimension 0") != std::string::npos);
  tensorflow::TensorProto unknown;
  unknown.set_dtype(tensorflow::DT_FLOAT);
  unknown.mutable_tensor_shape()->set_unknown_rank(true);
  CHECK(error_of(unknown, spec).find("unknown_rank") != std::string::npos);
  // Sizes whose product overflows are refused before anything is allocated.
  auto huge = proto(tensorflow::DT_FLOAT, {int64_t{1} << 40, 3});
  CHECK(error_of(huge, spec).find("too many elements") != std::string::npos);
  // One value would fill a shape of a billion rows: refused by what a request may carry,
  // before the tensor is allocated. The limit itself is taken.
  auto repeated = proto(tensorflow::DT_FLOAT, {1'000'000'000, 3});
  repeated.add_float_val(1);
  CHECK(error_of(repeated, spec).find("would take 12000000000 bytes, more than the " + std::to_string(kLimit)) !=
        std::string::npos);
  auto at_limit = proto(tensorflow::DT_FLOAT, {kLimit / 12, 3});
  at_limit.add_float_val(2);
  auto filled = serve::tensor_from_proto(at_limit, spec, kLimit);
  REQUIRE_MESSAGE(filled.ok(), filled.status().to_string());
  CHECK(filled->data<float>()[filled->num_elements() - 1] == 2.0f);
  auto over = proto(tensorflow::DT_FLOAT, {kLimit / 12 + 1, 3});
  over.add_float_val(2);
  CHECK(error_of(over, spec).find("a request may carry") != std::string::npos);

  // Other dtypes: int64 from int64_val, uint8 from int_val, bool from bool_val.
  auto i = proto(tensorflow::DT_INT64, {2});
  i.add_int64_val(int64_t{1} << 40);
  i.add_int64_val(-5);
  auto ti = serve::tensor_from_proto(i, TensorSpec{"ids", af::DType::i64, af::Shape({-1})}, kLimit);
  REQUIRE(ti.ok());
  CHECK(ti->to_vector<int64_t>() == std::vector<int64_t>{int64_t{1} << 40, -5});
  auto u = proto(tensorflow::DT_UINT8, {1, 2});
  u.add_int_val(200);
  u.add_int_val(7);
  auto tu = serve::tensor_from_proto(u, TensorSpec{"pixels", af::DType::u8, af::Shape({-1, 2})}, kLimit);
  REQUIRE(tu.ok());
  CHECK(tu->data<uint8_t>()[0] == 200);
  CHECK(tu->data<uint8_t>()[1] == 7);
  auto b = proto(tensorflow::DT_BOOL, {3});
  b.add_bool_val(true);
  auto tb = serve::tensor_from_proto(b, TensorSpec{"mask", af::DType::boolean, af::Shape({-1})}, kLimit);
  REQUIRE(tb.ok());
  CHECK(tb->element_as_double(2) == 1.0);
#endif
}

TEST_CASE("needs protobuf: an output tensor becomes a TensorProto with its dtype, shape and typed values") {
#if !AF_SERVE_GRPC
  aft::skip(kNotBuilt);
#else
  tensorflow::TensorProto p;
  REQUIRE(serve::tensor_to_proto(af::Tensor::from({{1.5f, 2.5f}, {3.5f, 4.5f}}), &p).ok());
  CHECK(p.dtype() == tensorflow::DT_FLOAT);
  REQUIRE(p.tensor_shape().dim_size() == 2);
  CHECK(p.tensor_shape().dim(0).size() == 2);
  CHECK(p.tensor_shape().dim(1).size() == 2);
  CHECK(std::vector<float>(p.float_val().begin(), p.float_val().end()) == std::vector<float>{1.5f, 2.5f, 3.5f, 4.5f});
  CHECK(p.tensor_content().empty());

  REQUIRE(serve::tensor_to_proto(af::Tensor::from_vector<int64_t>({9, -1}), &p).ok());
  CHECK(p.dtype() == tensorflow::DT_INT64);
  CHECK(std::vector<int64_t>(p.int64_val().begin(), p.int64_val().end()) == std::vector<int64_t>{9, -1});
  CHECK(p.float_val_size() == 0);  // the proto was cleared first

  REQUIRE(serve::tensor_to_proto(af::Tensor::from_vector<double>({0.25}), &p).ok());
  CHECK(p.dtype() == tensorflow::DT_DOUBLE);
  CHECK(p.double_val(0) == 0.25);

  // What the input decoder reads back is what was written.
  TensorSpec spec{"y", af::DType::f32, af::Shape({-1, 2})};
  REQUIRE(serve::tensor_to_proto(af::Tensor::from({{1.f, 2.f}, {3.f, 4.f}, {5.f, 6.f}}), &p).ok());
  auto back = serve::tensor_from_proto(p, spec, kLimit);
  REQUIRE(back.ok());
  CHECK(back->to_vector<float>() == std::vector<float>{1, 2, 3, 4, 5, 6});
#endif
}
