// The tensor codec (TensorMsg / TensorProto bytes) and CRC-32C.
#include <doctest/doctest.h>

#include <actorflow/actorflow.h>
#include <actorflow/crc32c.h>
#include <actorflow/tensor_codec.h>
#include <capnp/message.h>
#include <capnp/serialize.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>

#include "tensor.capnp.h"

namespace af = actorflow;

namespace {

af::TensorMessage roundtrip(const af::TensorMessage& m) {
  auto r = af::decode_tensor_message(af::encode_tensor_message(m));
  if (!r.ok()) FAIL(r.status().to_string());
  return std::move(r).value();
}

void check_same(const af::Tensor& a, const af::Tensor& b) {
  INFO(a.debug_string() << " vs " << b.debug_string());
  REQUIRE(a.valid() == b.valid());
  CHECK(a.dtype() == b.dtype());
  CHECK(a.shape() == b.shape());
  if (a.valid() && a.dtype() != af::string) {
    // Bitwise, so NaNs and -0.0 count.
    if (a.bytes()) CHECK(std::memcmp(a.raw_data(), b.raw_data(), a.bytes()) == 0);
  } else {
    CHECK(a.equals(b));
  }
}

// Bytes of a hand-built message, for inputs an encoder would never produce.
template <typename Fill>
std::string craft(Fill fill) {
  capnp::MallocMessageBuilder mb;
  fill(mb);
  auto words = capnp::messageToFlatArray(mb);
  auto bytes = words.asBytes();
  return std::string(reinterpret_cast<const char*>(bytes.begin()), bytes.size());
}

std::string craft_proto(af::wire::DType dtype, std::vector<int64_t> dims, std::string data) {
  return craft([&](capnp::MallocMessageBuilder& mb) {
    auto p = mb.initRoot<af::wire::TensorProto>();
    p.setDtype(dtype);
    auto d = p.initShape().initDims(static_cast<unsigned>(dims.size()));
    for (size_t i = 0; i < dims.size(); ++i) d.set(static_cast<unsigned>(i), dims[i]);
    if (!data.empty()) p.setData(capnp::Data::Reader(reinterpret_cast<const kj::byte*>(data.data()), data.size()));
  });
}

}  // namespace

TEST_CASE("crc32c: known vectors, both implementations, extend and mask") {
  const std::string digits = "123456789";
  CHECK(af::crc32c(digits) == 0xE3069283u);
  CHECK(af::crc32c_extend_portable(0, digits.data(), digits.size()) == 0xE3069283u);
  // RFC 3720, B.4.
  std::string zeros(32, '\0'), ones(32, '\xff'), inc(32, '\0');
  for (int i = 0; i < 32; ++i) inc[static_cast<size_t>(i)] = static_cast<char>(i);
  CHECK(af::crc32c(zeros) == 0x8A9136AAu);
  CHECK(af::crc32c(ones) == 0x62A8AB43u);
  CHECK(af::crc32c(inc) == 0x46DD794Eu);
  CHECK(af::crc32c("", 0) == 0u);

  std::mt19937 rng(7);
  std::string big(100003, '\0');
  for (auto& c : big) c = static_cast<char>(rng());
  for (size_t start : {0, 1, 3, 7}) {
    for (size_t len : {0, 1, 7, 8, 9, 63, 64, 1000, 99990}) {
      const char* p = big.data() + start;
      uint32_t hw = af::crc32c(p, len);
      CHECK(hw == af::crc32c_extend_portable(0, p, len));
      size_t cut = len / 3;
      CHECK(af::crc32c_extend(af::crc32c(p, cut), p + cut, len - cut) == hw);
    }
  }
  for (uint32_t v : {0u, 1u, 0xE3069283u, 0xffffffffu, 0xa282ead8u}) {
    CHECK(af::crc32c_unmask(af::crc32c_mask(v)) == v);
    CHECK(af::crc32c_mask(v) != v);
  }
  // TFRecord's mask, ((crc >> 15) | (crc << 17)) + 0xa282ead8, worked out by hand (not
  // by the formula again) for a few CRCs, wrapping past 2^32 in the last.
  CHECK(af::crc32c_mask(0u) == 0xa282ead8u);
  CHECK(af::crc32c_mask(0xE3069283u) == 0xc78ab0e5u);
  CHECK(af::crc32c_mask(0x8A9136AAu) == 0x0fd7fffau);
  CHECK(af::crc32c_mask(0xffffffffu) == 0xa282ead7u);
  // What TensorFlow's TFRecordWriter wrote (tests/data/examples.tfrecord): the first
  // record's length, 108, as 8 little-endian bytes, and the masked CRC that follows it.
  const std::string length{'\x6c', 0, 0, 0, 0, 0, 0, 0};
  CHECK(af::crc32c_mask(af::crc32c(length)) == 0xd7b0daf5u);
}

TEST_CASE("tensor codec: every dtype round-trips, scalars and empty tensors too") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<af::Tensor> tensors = {
      af::Tensor::from_vector<float>({1.5f, -0.0f, 3e38f, -1e-40f, INFINITY, -INFINITY}, {2, 3}),
      af::Tensor::from_vector<double>({1e308, -2.5, 5e-324, nan}, {4}),
      af::Tensor::from_vector<int32_t>({INT32_MIN, -1, 0, INT32_MAX}, {2, 1, 2}),
      af::Tensor::from_vector<int64_t>({INT64_MIN, INT64_MAX, 42}, {3}),
      af::Tensor::from_vector<uint8_t>({0, 255, 7}, {3, 1}),
      af::Tensor::from_vector<bool>({true, false, true, true, false}, {5}),
      af::Tensor::from_vector<std::string>({"", "hello", std::string("a\0b", 3), "\xff\xfe binary", std::string(5000, 'x')}, {5}),
      af::Tensor::scalar(3.25f),
      af::Tensor::scalar(int64_t{-7}),
      af::Tensor::scalar(true),
      af::Tensor::scalar("one string"),
  };
  for (af::DType t : {af::f32, af::f64, af::i32, af::i64, af::u8, af::boolean, af::string}) {
    tensors.push_back(af::Tensor(t, af::Shape{0}));
    tensors.push_back(af::Tensor(t, af::Shape{2, 0, 3}));
  }
  for (size_t i = 0; i < tensors.size(); ++i) {
    const af::Tensor& t = tensors[i];
    INFO("tensor #" << i << ": " << t.debug_string());
    af::TensorMessage m;
    m.step_id = 1000 + static_cast<int64_t>(i);
    m.edge = static_cast<uint32_t>(i * 3);
    m.producer = "node_" + std::to_string(i) + ":0";
    m.tensor = t;
    af::TensorMessage back = roundtrip(m);
    CHECK(back.step_id == m.step_id);
    CHECK(back.edge == m.edge);
    CHECK(back.producer == m.producer);
    CHECK(back.status.ok());
    check_same(t, back.tensor);
    if (t.dtype() == af::f64 && t.num_elements() == 4) CHECK(std::isnan(back.tensor.data<double>()[3]));

    auto alone = af::decode_tensor(af::encode_tensor(t));
    REQUIRE(alone.ok());
    check_same(t, *alone);
  }
  // Negative step ids and the largest edge survive.
  af::TensorMessage m;
  m.step_id = -5;
  m.edge = UINT32_MAX;
  m.tensor = af::Tensor::scalar(1.0f);
  auto back = roundtrip(m);
  CHECK(back.step_id == -5);
  CHECK(back.edge == UINT32_MAX);
  CHECK(back.producer.empty());
}

TEST_CASE("tensor codec: an empty Tensor() and an error status travel") {
  auto none = af::decode_tensor(af::encode_tensor(af::Tensor()));
  REQUIRE(none.ok());
  CHECK_FALSE(none->valid());

  af::TensorMessage m;
  m.step_id = 9;
  m.edge = 2;
  m.producer = "loss:0";
  m.status = af::Status(af::Code::out_of_range, "gather 'g': index 17 is out of range [0, 10)");
  auto back = roundtrip(m);
  CHECK(back.status.code() == af::Code::out_of_range);
  CHECK(back.status.message() == m.status.message());
  CHECK_FALSE(back.tensor.valid());
  CHECK(back.producer == "loss:0");
  CHECK(back.step_id == 9);

  // Every status code survives.
  for (int c = 1; c <= static_cast<int>(af::Code::resource_exhausted); ++c) {
    m.status = af::Status(static_cast<af::Code>(c), "code " + std::to_string(c));
    CHECK(roundtrip(m).status.code() == static_cast<af::Code>(c));
  }
}

TEST_CASE("tensor codec: a 4 MiB tensor, copied or shared") {
  const int64_t n = 1 << 20;  // 4 MiB of f32
  af::Tensor t(af::f32, af::Shape{1024, n / 1024});
  for (int64_t i = 0; i < n; ++i) t.data<float>()[i] = static_cast<float>(i) * 0.5f - 3.0f;
  af::TensorMessage m;
  m.producer = "big:0";
  m.tensor = t;
  std::string bytes = af::encode_tensor_message(m);
  CHECK(bytes.size() >= t.bytes());
  CHECK(bytes.size() < t.bytes() + 1024);

  // Decoding the encoder's own buffer shares it: one copy for the round trip.
  {
    std::string copy = bytes;
    const char* begin = copy.data();
    size_t size = copy.size();
    auto back = af::decode_tensor_message(std::move(copy));
    REQUIRE(back.ok());
    check_same(t, back->tensor);
    const char* data = static_cast<const char*>(back->tensor.raw_data());
    CHECK(reinterpret_cast<uintptr_t>(data) % af::kTensorAlignment == 0);
    if (reinterpret_cast<uintptr_t>(begin) % 8 == 0) {
      CHECK(data >= begin);
      CHECK(data + t.bytes() <= begin + size);
    }
  }

  // A transport's own buffer is shared when the bytes sit at the sender's alignment; the
  // tensor keeps the buffer alive.
  static bool freed;
  freed = false;
  size_t shift = reinterpret_cast<uintptr_t>(bytes.data()) % 64;
  char* block = static_cast<char*>(std::aligned_alloc(64, (bytes.size() + 127) / 64 * 64));
  std::memcpy(block + shift, bytes.data(), bytes.size());
  {
    std::shared_ptr<void> owner(block, [](void* p) {
      freed = true;
      std::free(p);
    });
    auto shared = af::decode_tensor_message(owner, block + shift, bytes.size());
    owner.reset();
    REQUIRE(shared.ok());
    const char* data = static_cast<const char*>(shared->tensor.raw_data());
    CHECK(data >= block);
    CHECK(data + shared->tensor.bytes() <= block + shift + bytes.size());
    CHECK_FALSE(freed);
    check_same(t, shared->tensor);
  }
  CHECK(freed);

  // Bytes that are not 64-byte aligned (here: not even 8) are copied, and still decode.
  std::string shifted(bytes.size() + 1, '\0');
  std::memcpy(shifted.data() + 1, bytes.data(), bytes.size());
  auto copied = af::decode_tensor_message(nullptr, shifted.data() + 1, bytes.size());
  REQUIRE(copied.ok());
  check_same(t, copied->tensor);
  CHECK(reinterpret_cast<uintptr_t>(copied->tensor.raw_data()) % af::kTensorAlignment == 0);

  // Large u8 data of an odd size takes the copying path through the encoder.
  af::Tensor odd(af::u8, af::Shape{100001});
  for (int64_t i = 0; i < odd.num_elements(); ++i) odd.data<uint8_t>()[i] = static_cast<uint8_t>(i * 7);
  auto odd_back = af::decode_tensor(af::encode_tensor(odd));
  REQUIRE(odd_back.ok());
  check_same(odd, *odd_back);
}

TEST_CASE("tensor codec: throughput of encode + decode (informational)") {
  af::Tensor t = af::Tensor::filled(af::f32, af::Shape{16 << 20}, 1.0);  // 64 MiB
  af::TensorMessage m;
  m.tensor = t;
  for (int warm = 0; warm < 2; ++warm) (void)af::decode_tensor_message(af::encode_tensor_message(m));
  const int reps = 5;
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < reps; ++i) {
    auto r = af::decode_tensor_message(af::encode_tensor_message(m));
    REQUIRE(r.ok());
    CHECK(r->tensor.num_elements() == t.num_elements());
  }
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  MESSAGE("encode+decode of a 64 MiB tensor: " << (reps * t.bytes() / s / 1e9) << " GB/s");
}

TEST_CASE("tensor codec: a tensor too large for one message, or in device memory, becomes an error status") {
  // A fake buffer claiming 600 MiB: the encoder must refuse before reading any of it.
  static char dummy[64];
  auto buffer = std::make_shared<af::Buffer>(dummy, size_t{600} << 20, af::DeviceId{}, nullptr, nullptr);
  af::TensorMessage m;
  m.producer = "huge:0";
  m.tensor = af::Tensor(af::u8, af::Shape{int64_t{600} << 20}, buffer);
  auto back = roundtrip(m);
  CHECK_FALSE(back.status.ok());
  CHECK(back.status.message().find("huge:0") != std::string::npos);
  CHECK(back.status.message().find("512 MiB") != std::string::npos);
  CHECK_FALSE(back.tensor.valid());
  CHECK_THROWS_AS(af::encode_tensor(m.tensor), af::Error);

  // Device memory is refused the same way, without being read.
  auto on_gpu = std::make_shared<af::Buffer>(dummy, 16, af::DeviceId{af::DeviceType::GPU, 1}, nullptr, nullptr);
  m.producer = "gpu_node:0";
  m.tensor = af::Tensor(af::f32, af::Shape{4}, on_gpu);
  auto refused = roundtrip(m);
  CHECK_FALSE(refused.status.ok());
  CHECK(refused.status.message().find("gpu:1") != std::string::npos);
  CHECK_THROWS_AS(af::encode_tensor(m.tensor), af::Error);
}

TEST_CASE("tensor codec: truncated, padded and corrupted bytes give errors") {
  af::TensorMessage m;
  m.step_id = 3;
  m.producer = "x:0";
  m.tensor = af::Tensor::from_vector<std::string>({"alpha", "beta"}, {2});
  std::string good = af::encode_tensor_message(m);
  REQUIRE(af::decode_tensor_message(good).ok());

  for (size_t len = 0; len < good.size(); ++len) {
    auto r = af::decode_tensor_message(good.substr(0, len));
    INFO("prefix of " << len << " bytes");
    CHECK_FALSE(r.ok());
    if (!r.ok()) CHECK(r.status().code() == af::Code::data_loss);
  }
  auto odd = af::decode_tensor_message(good + "x");
  CHECK_FALSE(odd.ok());
  CHECK(odd.status().message().find("multiple of 8") != std::string::npos);
  auto trailing = af::decode_tensor_message(good + std::string(8, '\0'));
  CHECK_FALSE(trailing.ok());
  CHECK(trailing.status().message().find("trailing") != std::string::npos);
  auto garbage = af::decode_tensor_message(std::string(64, '\xff'));
  CHECK_FALSE(garbage.ok());

  using W = af::wire::DType;
  auto expect_error = [](const std::string& bytes, const std::string& needle) {
    auto r = af::decode_tensor(bytes);
    CHECK_FALSE(r.ok());
    INFO(r.status().to_string());
    CHECK(r.status().message().find(needle) != std::string::npos);
  };
  expect_error(craft_proto(static_cast<W>(99), {1}, std::string(4, '\0')), "unknown dtype code 99");
  expect_error(craft_proto(W::F32, {2, 3}, std::string(20, '\0')), "holds 20 data bytes, expected 24");
  expect_error(craft_proto(W::F32, {1 << 30, 1 << 30}, std::string(8, '\0')), "expected more");
  expect_error(craft_proto(W::I64, {int64_t{1} << 40, int64_t{1} << 40, 0}, ""), "more elements than fit");
  expect_error(craft_proto(W::F32, {2, -1}, std::string(8, '\0')), "dimension -1");
  expect_error(craft_proto(W::BOOLEAN, {3}, std::string("\x01\x00\x02", 3)), "holds byte 2 at element 2");
  expect_error(craft_proto(W::STRING, {3}, ""), "holds 0 strings, expected 3");
  // A zero-element tensor with huge other dims is fine.
  auto empty = af::decode_tensor(craft_proto(W::F64, {0, int64_t{1} << 50}, ""));
  REQUIRE(empty.ok());
  CHECK(empty->num_elements() == 0);

  auto bad_status = af::decode_tensor_message(craft([](capnp::MallocMessageBuilder& mb) {
    auto msg = mb.initRoot<af::wire::TensorMsg>();
    msg.setProducer("p:0");
    msg.initStatus().setCode(1234);
  }));
  CHECK_FALSE(bad_status.ok());
  CHECK(bad_status.status().message().find("unknown status code 1234") != std::string::npos);

  auto bad_tensor = af::decode_tensor_message(craft([](capnp::MallocMessageBuilder& mb) {
    auto msg = mb.initRoot<af::wire::TensorMsg>();
    msg.setProducer("p:0");
    msg.setStepId(77);
    msg.initTensor().initShape().initDims(1).set(0, 5);
  }));
  CHECK_FALSE(bad_tensor.ok());
  CHECK(bad_tensor.status().message().find("'p:0' (step 77") != std::string::npos);
}
