// The GPU device and its first kernels: copies, elementwise ops with
// broadcasting, Sum/Mean, BiasAdd, MatMul and _FusedMatMul through cuBLASLt, each
// compared with its CPU kernel on random inputs. The kernels run directly (not through a
// session: placement on GPUs is the next step), through the same async path that node
// actors use. Without a GPU each case prints "GPU tests skipped: no device" and CTest
// reports it skipped (AF_REQUIRE_GPU=1 makes that a failure).
#include <doctest/doctest.h>

#include <actorflow/ops/cuda_info.h>
#include <actorflow/ops/gpu.h>

#include <atomic>
#include <cmath>
#include <condition_variable>
#include <mutex>
#include <random>

#include "actorflow/kernel.h"
#include "actorflow/ops/cpu_device.h"
#include "gpu_kernel_harness.h"
#include "interop/skip.h"
#include "test_util.h"

namespace af = actorflow;

namespace {

using aft::make_node;
using aft::random_f32;
using aft::require_gpu;

af::Tensor run_cpu(const af::Node& n, const std::vector<af::Tensor>& inputs) {
  auto k = af::KernelRegistry::global().create(n, af::DeviceType::CPU);
  REQUIRE_MESSAGE(k.ok(), k.status().to_string());
  af::OpKernelContext ctx(n, inputs, af::default_cpu_device(), nullptr, 1);
  af::Status s = af::run_kernel_blocking(**k, ctx);
  REQUIRE_MESSAGE(s.ok(), s.to_string());
  return ctx.output(0);
}

// The node's status on gpu:0, and its output brought back to the host.
af::Status try_gpu(const af::Node& n, const std::vector<af::Tensor>& inputs, af::Tensor* out,
                   bool copy_inputs = true) {
  auto dev = af::gpu_device_context(0);
  REQUIRE_MESSAGE(dev.ok(), dev.status().to_string());
  std::vector<af::Tensor> on_gpu;
  for (const af::Tensor& t : inputs) {
    if (!copy_inputs) {
      on_gpu.push_back(t);
      continue;
    }
    auto c = af::copy_to_gpu(t, 0);
    REQUIRE_MESSAGE(c.ok(), c.status().to_string());
    CHECK(c->device().type == af::DeviceType::GPU);
    on_gpu.push_back(*c);
  }
  auto k = af::KernelRegistry::global().create(n, af::DeviceType::GPU);
  REQUIRE_MESSAGE(k.ok(), k.status().to_string());
  REQUIRE((*k)->as_async() != nullptr);
  af::OpKernelContext ctx(n, on_gpu, *dev, nullptr, 1);
  af::Status s = af::run_kernel_blocking(**k, ctx);
  REQUIRE_MESSAGE(s.code() != af::Code::deadline_exceeded, s.to_string());
  if (!s.ok()) return s;
  CHECK(ctx.output(0).device().type == af::DeviceType::GPU);
  auto back = af::copy_to_host(ctx.output(0));
  REQUIRE_MESSAGE(back.ok(), back.status().to_string());
  *out = *back;
  return s;
}

af::Tensor run_gpu(const af::Node& n, const std::vector<af::Tensor>& inputs) {
  af::Tensor out;
  af::Status s = try_gpu(n, inputs, &out);
  REQUIRE_MESSAGE(s.ok(), s.to_string());
  return out;
}

// |gpu - cpu| <= atol + rtol * |cpu| elementwise, NaNs in the same places.
void check_close(const af::Tensor& gpu, const af::Tensor& cpu, double rtol, double atol, const std::string& what) {
  INFO(what);
  REQUIRE(gpu.shape() == cpu.shape());
  const float* g = gpu.data<float>();
  const float* c = cpu.data<float>();
  int64_t bad = 0, first = -1;
  for (int64_t i = 0; i < cpu.num_elements(); ++i) {
    const bool ok = (std::isnan(g[i]) && std::isnan(c[i])) ||
                    std::fabs(double(g[i]) - double(c[i])) <= atol + rtol * std::fabs(double(c[i]));
    if (!ok && bad++ == 0) first = i;
  }
  CHECK_MESSAGE(bad == 0, bad << " elements differ; first at " << first << ": gpu "
                              << (first >= 0 ? g[first] : 0.f) << " vs cpu " << (first >= 0 ? c[first] : 0.f));
}

void compare(const std::string& op, std::vector<af::Tensor> inputs, double rtol, double atol,
             std::map<std::string, af::AttrValue> attrs = {}) {
  af::Graph g;
  const af::Node& n = make_node(g, op, inputs, std::move(attrs));
  std::string what = op;
  for (auto& t : inputs) what += " " + t.shape().to_string();
  check_close(run_gpu(n, inputs), run_cpu(n, inputs), rtol, atol, what);
}

}  // namespace

TEST_CASE("the GPU API answers without a GPU, with or without CUDA") {
  const int n = af::cuda_device_count();
  auto past = af::gpu_device_context(n);
  CHECK_FALSE(past.ok());
  CHECK(past.status().code() == af::Code::unavailable);
  auto host = af::copy_to_host(af::Tensor::from_vector<float>({1, 2}));
  CHECK_FALSE(host.ok());
  CHECK(host.status().code() == af::Code::invalid_argument);
  // The GPU kernels are registered exactly when the build has CUDA.
  for (const char* op : {"Add", "Relu", "Sum", "MatMul", "_FusedMatMul", "BiasAdd", "_CopyToDevice", "_CopyToHost"})
    CHECK_MESSAGE(af::KernelRegistry::global().has(op, af::DeviceType::GPU) == af::built_with_cuda(), op);
  // Where there is no GPU, making a GPU kernel fails (it does not load CUDA to make one).
  if (n == 0 && af::built_with_cuda() && !af::cuda_module_loaded()) {
    af::Graph g;
    const af::Node& relu = make_node(g, "Relu", {af::Tensor::from_vector<float>({1, -1})});
    auto k = af::KernelRegistry::global().create(relu, af::DeviceType::GPU);
    REQUIRE_FALSE(k.ok());
    CHECK(k.status().code() == af::Code::unavailable);
    CHECK(k.status().message().find("no GPU") != std::string::npos);
  }
}

TEST_CASE("needs a GPU: tensors round-trip host -> device -> host bit for bit") {
  require_gpu();
  for (af::Shape s : {af::Shape{}, af::Shape{0}, af::Shape{1}, af::Shape{3, 5}, af::Shape{1 << 22}}) {
    af::Tensor h = random_f32(s, 7);
    auto d = af::copy_to_gpu(h, 0);
    REQUIRE_MESSAGE(d.ok(), d.status().to_string());
    CHECK(d->device() == af::DeviceId{af::DeviceType::GPU, 0});
    CHECK(d->shape() == s);
    auto back = af::copy_to_host(*d);
    REQUIRE_MESSAGE(back.ok(), back.status().to_string());
    CHECK(back->device().type == af::DeviceType::CPU);
    CHECK(back->equals(h));
  }
  auto stats = af::gpu_memory_stats(0);
  REQUIRE(stats.ok());
  CHECK(stats->peak_bytes_in_use >= int64_t{4} << 22);
}

TEST_CASE("needs a GPU: unary ops match the CPU (rtol 1e-5, atol 1e-6)") {
  require_gpu();
  for (const char* op : {"Neg", "Abs", "Sign", "Square", "Relu", "Exp", "Sigmoid", "Tanh", "Softplus"})
    compare(op, {random_f32({37, 129}, 1)}, 1e-5, 1e-6);
  // Logs and roots of positive inputs.
  for (const char* op : {"Log", "Sqrt", "Rsqrt"}) compare(op, {random_f32({1000}, 2, 0.01f, 4.f)}, 1e-5, 1e-6);
  compare("Relu", {random_f32({0, 3}, 3)}, 0, 0);
}

TEST_CASE("needs a GPU: binary ops with broadcasting match the CPU (rtol 1e-5, atol 1e-6)") {
  require_gpu();
  const std::vector<std::pair<af::Shape, af::Shape>> shapes = {
      {{4, 5}, {4, 5}}, {{4, 5}, {5}}, {{3, 1, 5}, {4, 1}}, {{}, {2, 3}}, {{2, 3, 4}, {2, 1, 4}}, {{1, 7}, {6, 1}},
      {{2, 1, 3, 1, 2}, {1, 4, 1, 5, 2}}, {{256, 300}, {300}}, {{0, 4}, {4}}};
  uint32_t seed = 10;
  for (const char* op : {"Add", "Sub", "Mul", "Maximum", "Minimum", "SquaredDifference"})
    for (auto& [a, b] : shapes) compare(op, {random_f32(a, seed++), random_f32(b, seed++)}, 1e-5, 1e-6);
  // Divisors and bases kept away from 0.
  for (auto& [a, b] : shapes) {
    compare("Div", {random_f32(a, seed++), random_f32(b, seed++, 0.5f, 2.f)}, 1e-5, 1e-6);
    compare("Pow", {random_f32(a, seed++, 0.5f, 2.f), random_f32(b, seed++)}, 1e-5, 1e-6);
  }
}

TEST_CASE("needs a GPU: Sum and Mean match the CPU (rtol 1e-4, atol 1e-4 + 2e-6 per summed element)") {
  require_gpu();
  struct Case {
    af::Shape shape;
    af::AttrValue::Ints axes;
  };
  const std::vector<Case> cases = {{{1000}, {}},        {{64, 300}, {1}},      {{64, 300}, {0}},   {{4, 5, 6}, {0, 2}},
                                   {{4, 5, 6}, {-1}},   {{4, 5, 6}, {1}},      {{2, 3, 4, 5}, {1, 3}}, {{100000}, {0}},
                                   {{3, 0, 2}, {1}},    {{3, 1, 2}, {1}}};
  uint32_t seed = 100;
  for (const Case& c : cases) {
    // The two sides sum in different orders: rounding grows with the count (|x| <= 2).
    int64_t count = 1;
    for (int i = 0; i < c.shape.rank(); ++i) {
      bool reduced = c.axes.empty();
      for (int64_t a : c.axes) reduced = reduced || (a < 0 ? a + c.shape.rank() : a) == i;
      if (reduced) count *= c.shape.dim(i);
    }
    for (bool keep : {false, true}) {
      const std::map<std::string, af::AttrValue> attrs = {{"axes", c.axes}, {"keepdims", keep}};
      compare("Sum", {random_f32(c.shape, seed++)}, 1e-4, 1e-4 + 2e-6 * double(count), attrs);
      compare("Mean", {random_f32(c.shape, seed++)}, 1e-4, 1e-4 + 2e-6, attrs);
    }
  }
}

TEST_CASE("needs a GPU: BiasAdd matches the CPU, NHWC and NCHW (exact)") {
  require_gpu();
  compare("BiasAdd", {random_f32({32, 10}, 1), random_f32({10}, 2)}, 0, 0);
  compare("BiasAdd", {random_f32({2, 4, 4, 3}, 3), random_f32({3}, 4)}, 0, 0);
  compare("BiasAdd", {random_f32({2, 3, 4, 4}, 5), random_f32({3}, 6)}, 0, 0, {{"data_format", "NCHW"}});
}

TEST_CASE("needs a GPU: MatMul and _FusedMatMul match the CPU (f32 accumulation: rtol 1e-4, atol 1e-4 * k)") {
  require_gpu();
  struct Case {
    int64_t m, k, n;
  };
  uint32_t seed = 1000;
  for (Case c : {Case{1, 1, 1}, Case{7, 13, 5}, Case{64, 784, 128}, Case{128, 128, 10}, Case{257, 129, 65}}) {
    const double atol = 1e-4 * double(c.k);
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        af::Tensor a = random_f32(ta ? af::Shape{c.k, c.m} : af::Shape{c.m, c.k}, seed++);
        af::Tensor b = random_f32(tb ? af::Shape{c.n, c.k} : af::Shape{c.k, c.n}, seed++);
        compare("MatMul", {a, b}, 1e-4, atol, {{"transpose_a", ta}, {"transpose_b", tb}});
        af::Tensor bias = random_f32({c.n}, seed++);
        for (bool relu : {false, true})
          compare("_FusedMatMul", {a, b, bias}, 1e-4, atol, {{"transpose_a", ta}, {"transpose_b", tb}, {"relu", relu}});
      }
  }
  // Equal batch dims go through cuBLASLt's strided batches.
  compare("MatMul", {random_f32({3, 2, 8, 16}, seed++), random_f32({3, 2, 16, 4}, seed++)}, 1e-4, 1.6e-3);
  // An empty inner dimension gives zeros.
  compare("MatMul", {random_f32({4, 0}, seed++), random_f32({0, 3}, seed++)}, 0, 0);
}

TEST_CASE("needs a GPU: kernel errors are Status values naming the node and op") {
  require_gpu();
  af::Graph g;
  af::Tensor a = random_f32({2, 3}, 1);
  const af::Node& n = make_node(g, "Add", {a, a});
  af::Tensor out;
  // Host tensors given straight to a GPU kernel: refused, with the way out named.
  af::Status s = try_gpu(n, {a, a}, &out, /*copy_inputs=*/false);
  CHECK(s.code() == af::Code::invalid_argument);
  CHECK_MESSAGE(s.message().find(n.name) != std::string::npos, s.to_string());
  CHECK_MESSAGE(s.message().find("Add") != std::string::npos, s.to_string());
  CHECK_MESSAGE(s.message().find("_CopyToDevice") != std::string::npos, s.to_string());
  // A dtype the kernel lacks.
  af::Graph g2;
  af::NodeSpec spec;
  spec.op = "Neg";
  spec.inputs = {af::placeholder(g2, af::i64, {2}, "x")};
  auto r = g2.add_node(std::move(spec));
  REQUIRE(r.ok());
  s = try_gpu(r->node(), {af::Tensor::from_vector<int64_t>({1, 2})}, &out);
  CHECK(s.code() == af::Code::unimplemented);
  CHECK_MESSAGE(s.message().find("float32") != std::string::npos, s.to_string());
}

TEST_CASE("needs a GPU: 256 kernels in flight at once all finish through the one poller") {
  require_gpu();
  auto dev = af::gpu_device_context(0);
  REQUIRE(dev.ok());
  af::Tensor x = random_f32({1 << 16}, 9);
  auto xd = af::copy_to_gpu(x, 0);
  REQUIRE(xd.ok());
  af::Graph g;
  const af::Node& n = make_node(g, "Relu", {x});
  auto k = af::KernelRegistry::global().create(n, af::DeviceType::GPU);
  REQUIRE(k.ok());
  constexpr int kCount = 256;
  std::vector<std::unique_ptr<af::OpKernelContext>> ctxs;
  std::mutex mu;
  std::condition_variable cv;
  int finished = 0;
  for (int i = 0; i < kCount; ++i) {
    ctxs.push_back(std::make_unique<af::OpKernelContext>(n, std::vector<af::Tensor>{*xd}, *dev, nullptr, i));
    (*k)->as_async()->compute_async(*ctxs.back(), [&] {
      std::lock_guard<std::mutex> lock(mu);
      ++finished;
      cv.notify_all();
    });
  }
  std::unique_lock<std::mutex> lock(mu);
  REQUIRE(cv.wait_for(lock, std::chrono::seconds(60), [&] { return finished == kCount; }));
  lock.unlock();
  af::Tensor cpu = run_cpu(n, {x});
  for (int i : {0, kCount / 2, kCount - 1}) {
    REQUIRE_MESSAGE(ctxs[static_cast<size_t>(i)]->ok(), ctxs[static_cast<size_t>(i)]->status().to_string());
    auto back = af::copy_to_host(ctxs[static_cast<size_t>(i)]->output(0));
    REQUIRE(back.ok());
    CHECK(back->equals(cpu));
  }
}
