// Tensors: dtypes, shapes, buffers, the pooling allocator, numpy-style printing.
#include <doctest/doctest.h>

#include <actorflow/actorflow.h>
#include <actorflow/allocator.h>

#include <cstdint>

namespace af = actorflow;

TEST_CASE("dtype sizes and names") {
  CHECK(af::dtype_size(af::f32) == 4);
  CHECK(af::dtype_size(af::f64) == 8);
  CHECK(af::dtype_size(af::i32) == 4);
  CHECK(af::dtype_size(af::i64) == 8);
  CHECK(af::dtype_size(af::u8) == 1);
  CHECK(af::dtype_size(af::boolean) == 1);
  af::DType t;
  REQUIRE(af::dtype_from_name("float64", &t));
  CHECK(t == af::f64);
  CHECK_FALSE(af::dtype_from_name("float16", &t));
}

TEST_CASE("shapes: unknown dims, compatibility, broadcasting") {
  af::Shape s{-1, 784};
  CHECK_FALSE(s.is_fully_defined());
  CHECK(s.num_elements() == -1);
  CHECK(s.to_string() == "[?,784]");
  CHECK(s.compatible_with(af::Shape{64, 784}));
  CHECK_FALSE(s.compatible_with(af::Shape{64, 10}));
  CHECK_FALSE(s.compatible_with(af::Shape{784}));
  CHECK(af::Shape::unknown_rank().compatible_with(af::Shape{1, 2, 3}));
  af::Shape m;
  REQUIRE(s.merge(af::Shape{32, -1}, &m));
  CHECK(m == af::Shape{32, 784});
  af::Shape b;
  REQUIRE(af::broadcast_shapes(af::Shape{2, 1, 3}, af::Shape{4, 1}, &b));
  CHECK(b == af::Shape{2, 4, 3});
  REQUIRE(af::broadcast_shapes(af::Shape{-1, 3}, af::Shape{3}, &b));
  CHECK(b == af::Shape{-1, 3});
  CHECK_FALSE(af::broadcast_shapes(af::Shape{2, 3}, af::Shape{4}, &b));
  CHECK(af::Shape{}.is_scalar());
  CHECK(af::Shape{0, 5}.num_elements() == 0);
}

TEST_CASE("buffers are 64-byte aligned, shared by copies, copied by clone") {
  auto t = af::Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  CHECK(reinterpret_cast<uintptr_t>(t.raw_data()) % 64 == 0);
  af::Tensor u = t;
  CHECK(u.shares_buffer_with(t));
  CHECK(t.buffer_use_count() == 2);
  af::Tensor c = t.clone();
  CHECK_FALSE(c.shares_buffer_with(t));
  CHECK(c.equals(t));
  c.data<float>()[0] = 9;
  CHECK(t.data<float>()[0] == 1);
  CHECK(t.device().type == af::DeviceType::CPU);
  auto r = t.reshaped({3, 2});
  REQUIRE(r.ok());
  CHECK(r->shares_buffer_with(t));
  CHECK_FALSE(t.reshaped({4, 2}).ok());
  CHECK_THROWS_AS(af::Tensor(af::f32, af::Shape{-1, 2}), af::Error);
  CHECK_THROWS_AS(af::Tensor::from_vector<float>({1, 2, 3}, {2, 2}), af::Error);
}

TEST_CASE("the pooling allocator reuses large blocks") {
  auto* a = af::cpu_allocator();
  auto before = a->stats();
  {
    af::Tensor big(af::f32, {256, 1024});
    big.data<float>()[0] = 1;
  }
  auto mid = a->stats();
  CHECK(mid.bytes_cached >= 256 * 1024 * 4);
  { af::Tensor again(af::f32, {256, 1024}); }
  auto after = a->stats();
  CHECK(after.num_pool_hits > mid.num_pool_hits);
  CHECK(after.bytes_in_use == before.bytes_in_use);
}

TEST_CASE("numpy-style printing") {
  CHECK(af::Tensor::from_vector<float>({1, 2, 3, 4}, {2, 2}).to_string() == "[[1. 2.]\n [3. 4.]]");
  CHECK(af::Tensor::from_vector<float>({1.5f, -2, 3}, {3}).to_string() == "[ 1.5 -2.   3. ]");
  CHECK(af::Tensor::from_vector<int32_t>({1, 20, 3}).to_string() == "[ 1 20  3]");
  CHECK(af::Tensor::scalar(42).to_string() == "42");
  CHECK(af::Tensor::scalar(0.5).to_string() == "0.5");
  CHECK(af::Tensor::from_vector<bool>({true, false}).to_string() == "[ True False]");
  CHECK(af::Tensor::scalar("Hello, ActorFlow!").to_string() == "Hello, ActorFlow!");
  CHECK(af::Tensor::from_vector<std::string>({"a", "bc"}).to_string() == "['a' 'bc']");
  CHECK(af::Tensor::from_vector<float>({1, 2, 3, 4, 5, 6, 7, 8}, {2, 2, 2}).to_string() ==
        "[[[1. 2.]\n  [3. 4.]]\n\n [[5. 6.]\n  [7. 8.]]]");
  CHECK(af::Tensor(af::f32, {0}).to_string() == "[]");
  af::Tensor big = af::Tensor::filled(af::i32, {2000}, 7);
  CHECK(big.to_string() == "[7 7 7 ... 7 7 7]");
  CHECK(af::Tensor::from_vector<float>({1, 2}).debug_string() == "float32[2] [1. 2.]");
}

TEST_CASE("string tensors own their strings") {
  auto t = af::Tensor::from_vector<std::string>({"alpha", std::string(100, 'x')}, {2});
  af::Tensor c = t.clone();
  t = af::Tensor();
  CHECK(c.data<std::string>()[1].size() == 100);
  CHECK(c.item<std::string>() == "alpha");
}
