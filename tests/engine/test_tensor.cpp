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
  CHECK(c.data<std::string>()[0] == "alpha");
}

// ---- checked accessors, N-d access, construction from lists and user memory ----

namespace {
template <typename F>
std::string tensor_error(F&& f) {
  try {
    f();
  } catch (const af::Error& e) {
    return e.status().message();
  }
  return "<no error>";
}
}  // namespace

TEST_CASE("typed accessors check dtype, validity and size with libtorch-style messages") {
  auto i = af::Tensor::scalar(int64_t{3});
  CHECK(i.item<int64_t>() == 3);
  CHECK(tensor_error([&] { (void)i.item<float>(); }) == "expected float32 but the tensor is int64[]");
  auto f = af::Tensor::from_vector<float>({1, 2, 3});
  CHECK(tensor_error([&] { (void)f.to_vector<double>(); }) == "expected float64 but the tensor is float32[3]");
  CHECK(tensor_error([&] { (void)f.data<int32_t>(); }) == "expected int32 but the tensor is float32[3]");
  CHECK(f.data<float>()[2] == 3.0f);
  // A one-element tensor of any rank gives its item; more elements do not.
  CHECK(af::Tensor::from_vector<float>({7}, {1, 1}).item<float>() == 7.0f);
  CHECK(tensor_error([&] { (void)f.item<float>(); }) ==
        "expected a tensor with one element but the tensor is float32[3] (3 elements)");
  // What a fetched op gives back: an empty tensor, which names itself.
  af::Tensor empty;
  auto msg = tensor_error([&] { (void)empty.item<float>(); });
  CHECK(msg.find("expected float32 but the tensor is an empty Tensor") == 0);
  CHECK_THROWS_AS((void)empty.to_vector<float>(), af::Error);
  const af::Tensor& ce = empty;
  CHECK_THROWS_AS((void)ce.data<float>(), af::Error);
  CHECK(empty.raw_data() == nullptr);  // the untyped pointer stays unchecked
}

TEST_CASE("matrix and accessor index N-d tensors with bounds checks") {
  auto t = af::Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  auto m = t.matrix<float>();
  CHECK(m.size(0) == 2);
  CHECK(m.size(1) == 3);
  CHECK(m(0, 1) == 2.0f);
  CHECK(m(1, 2) == 6.0f);
  m(1, 0) = 40;
  CHECK(t.to_vector<float>() == std::vector<float>{1, 2, 3, 40, 5, 6});
  auto cube = af::Tensor::from_vector<int32_t>({0, 1, 2, 3, 4, 5, 6, 7}, {2, 2, 2});
  const af::Tensor& cc = cube;
  CHECK(cc.accessor<int32_t, 3>()(1, 0, 1) == 5);
  CHECK_THROWS_AS((void)cube.vec<int32_t>(), af::Error);  // rank 3, not 1
  CHECK(tensor_error([&] { (void)m(2, 0); }) == "index 2 is out of bounds for dimension 0 with size 2");
  CHECK(tensor_error([&] { (void)m(0, -1); }) == "index -1 is out of bounds for dimension 1 with size 3");
  CHECK(tensor_error([&] { (void)t.accessor<float, 3>(); }) == "expected a tensor of rank 3 but the tensor is float32[2,3]");
  CHECK(tensor_error([&] { (void)t.matrix<double>(); }) == "expected float64 but the tensor is float32[2,3]");
  CHECK(af::Tensor::from_vector<double>({1, 2}).vec<double>()(1) == 2.0);
}

TEST_CASE("Tensor::from builds nested initializer lists with the dtype inferred") {
  auto m = af::Tensor::from({{1.f, 2.f}, {3.f, 4.f}});
  CHECK(m.dtype() == af::f32);
  CHECK(m.shape() == af::Shape{2, 2});
  CHECK(m.to_vector<float>() == std::vector<float>{1, 2, 3, 4});
  auto ints = af::Tensor::from({{1, 2, 3}, {4, 5, 6}});
  CHECK(ints.dtype() == af::i32);
  CHECK(ints.matrix<int32_t>()(1, 1) == 5);
  CHECK(af::Tensor::from({int64_t{5}, int64_t{6}}).dtype() == af::i64);
  // A double literal is float32, as in torch::tensor and TF1; float64 by name.
  auto d = af::Tensor::from({0.5, 1.5});
  CHECK(d.dtype() == af::f32);
  CHECK(d.to_vector<float>() == std::vector<float>{0.5f, 1.5f});
  auto d64 = af::Tensor::from({0.1, 0.2}, af::f64);
  CHECK(d64.to_vector<double>() == std::vector<double>{0.1, 0.2});
  CHECK(af::Tensor::from({1, 2}, af::f32).to_vector<float>() == std::vector<float>{1, 2});
  CHECK(af::Tensor::from({true, false}).to_vector<bool>() == std::vector<bool>{true, false});
  CHECK(af::Tensor::from({"a", "bc"}).to_vector<std::string>() == std::vector<std::string>{"a", "bc"});
  auto r3 = af::Tensor::from({{{1.f}, {2.f}}, {{3.f}, {4.f}}});
  CHECK(r3.shape() == af::Shape{2, 2, 1});
  CHECK(r3.accessor<float, 3>()(1, 1, 0) == 4.0f);
  CHECK(af::Tensor::from({{{{7.f, 8.f}}}}).shape() == af::Shape{1, 1, 1, 2});
  CHECK(tensor_error([] { (void)af::Tensor::from({{1.f, 2.f}, {3.f}}); }) ==
        "Tensor::from: ragged nested list: dimension 1 has 1 elements here but 2 before");
  CHECK_THROWS_AS((void)af::Tensor::from({"a"}, af::f32), af::Error);
}

TEST_CASE("from_blob wraps user memory and runs the deleter when the last tensor lets go") {
  alignas(64) static float storage[6] = {1, 2, 3, 4, 5, 6};
  void* released = nullptr;
  {
    af::Tensor keep;
    {
      auto t = af::Tensor::from_blob(storage, {2, 3}, af::f32, [&](void* p) { released = p; });
      CHECK(t.raw_data() == storage);
      CHECK(t.matrix<float>()(1, 1) == 5.0f);
      t.matrix<float>()(0, 0) = 10;  // no copy: writes reach the user's memory
      CHECK(storage[0] == 10.0f);
      keep = t.slice_rows(1, 2);
    }
    CHECK(released == nullptr);  // the row view still shares the buffer
    CHECK(keep.to_vector<float>() == std::vector<float>{4, 5, 6});
  }
  CHECK(released == storage);
  // Without a deleter the caller keeps ownership.
  int64_t longs[2] = {8, 9};
  CHECK(af::Tensor::from_blob(longs, {2}, af::i64).to_vector<int64_t>() == std::vector<int64_t>{8, 9});
  CHECK(tensor_error([&] { (void)af::Tensor::from_blob(reinterpret_cast<char*>(storage) + 1, {1}, af::f32); }) ==
        "Tensor::from_blob: data is not aligned for float32");
  CHECK_THROWS_AS((void)af::Tensor::from_blob(storage, {2}, af::string), af::Error);
  CHECK_THROWS_AS((void)af::Tensor::from_blob(storage, {-1, 2}, af::f32), af::Error);
}

TEST_CASE("slice_rows is a view of rows [begin, end) along dim 0") {
  auto t = af::Tensor::from_vector<int32_t>({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, {4, 3});
  auto s = t.slice_rows(1, 3);
  CHECK(s.shape() == af::Shape{2, 3});
  CHECK(s.to_vector<int32_t>() == std::vector<int32_t>{3, 4, 5, 6, 7, 8});
  CHECK(s.shares_buffer_with(t));
  CHECK(s.slice_rows(1, 2).to_vector<int32_t>() == std::vector<int32_t>{6, 7, 8});  // a view of a view
  s.matrix<int32_t>()(0, 0) = 30;
  CHECK(t.to_vector<int32_t>()[3] == 30);
  CHECK(t.slice_rows(4, 4).shape() == af::Shape{0, 3});
  auto strings = af::Tensor::from_vector<std::string>({"a", "b", "c"});
  CHECK(strings.slice_rows(2, 3).to_vector<std::string>() == std::vector<std::string>{"c"});
  CHECK(tensor_error([&] { (void)t.slice_rows(2, 5); }) == "slice_rows: rows [2, 5) are not within the 4 rows of int32[4,3]");
  CHECK_THROWS_AS((void)t.slice_rows(3, 2), af::Error);
  CHECK_THROWS_AS((void)af::Tensor::scalar(1.0f).slice_rows(0, 1), af::Error);
}
