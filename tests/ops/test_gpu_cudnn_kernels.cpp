// The GPU kernels of the cuDNN group (ops/cuda/gpu_cudnn_*): Conv2D and
// its two gradients, MaxPool/AvgPool and their gradients, FusedBatchNorm and its gradient
// (training and inference), Dropout. Each is compared with its CPU kernel on random
// inputs, with the tolerance in the case's name; the kernels run directly through the
// async path that node actors use. Without a GPU each case prints "GPU tests skipped: no
// device" and CTest reports it skipped (AF_REQUIRE_GPU=1 makes that a failure).
#include <doctest/doctest.h>

#include <actorflow/ops/cuda_info.h>
#include <actorflow/ops/gpu.h>
#include <actorflow/ops/gpu_placement.h>

#include <cmath>
#include <random>

#include "actorflow/kernel.h"
#include "actorflow/ops/cpu_device.h"
#include "gpu_kernel_harness.h"
#include "interop/skip.h"
#include "test_util.h"

namespace af = actorflow;

namespace {

#ifdef AF_HAVE_CUDNN
constexpr bool kHaveCudnn = true;
#else
constexpr bool kHaveCudnn = false;
#endif

using aft::make_node;

void require_gpu() {
  aft::require_gpu();
  if (!kHaveCudnn) aft::skip("GPU tests skipped: built without cuDNN", "AF_REQUIRE_GPU");
}

// Convolution inputs in [-1, 1): sums over large windows stay well within float32.
af::Tensor random_tensor(af::Shape s, uint32_t seed, float lo = -1.f, float hi = 1.f) {
  return aft::random_f32(std::move(s), seed, lo, hi);
}

// Small integers: pooling windows full of ties.
af::Tensor tie_tensor(af::Shape s, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> u(0, 2);
  std::vector<float> v(static_cast<size_t>(s.num_elements()));
  for (float& x : v) x = static_cast<float>(u(rng));
  return af::Tensor::from_vector(v, std::move(s));
}

af::Tensor scalar_bool(bool b) { return af::Tensor::from_vector<bool>({b}, af::Shape{}); }

std::vector<af::Tensor> run_cpu_kernel(af::OpKernel& k, const af::Node& n, const std::vector<af::Tensor>& inputs) {
  af::OpKernelContext ctx(n, inputs, af::default_cpu_device(), nullptr, 1);
  af::Status s = af::run_kernel_blocking(k, ctx);
  REQUIRE_MESSAGE(s.ok(), s.to_string());
  return ctx.outputs();
}

std::vector<af::Tensor> run_cpu(const af::Node& n, const std::vector<af::Tensor>& inputs) {
  auto k = af::KernelRegistry::global().create(n, af::DeviceType::CPU);
  REQUIRE_MESSAGE(k.ok(), k.status().to_string());
  return run_cpu_kernel(**k, n, inputs);
}

// Runs `k` on gpu:0 with the inputs copied there (those flagged in `host` stay on the
// host); the outputs come back to the host.
af::Status try_gpu_kernel(af::OpKernel& k, const af::Node& n, const std::vector<af::Tensor>& inputs,
                          std::vector<af::Tensor>* outs, std::vector<bool> host = {}) {
  auto dev = af::gpu_device_context(0);
  REQUIRE_MESSAGE(dev.ok(), dev.status().to_string());
  std::vector<af::Tensor> on_gpu;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (i < host.size() && host[i]) {
      on_gpu.push_back(inputs[i]);
      continue;
    }
    auto c = af::copy_to_gpu(inputs[i], 0);
    REQUIRE_MESSAGE(c.ok(), c.status().to_string());
    on_gpu.push_back(*c);
  }
  REQUIRE(k.as_async() != nullptr);
  af::OpKernelContext ctx(n, on_gpu, *dev, nullptr, 1);
  af::Status s = af::run_kernel_blocking(k, ctx);
  REQUIRE_MESSAGE(s.code() != af::Code::deadline_exceeded, s.to_string());
  if (!s.ok()) return s;
  outs->clear();
  for (af::Tensor& t : ctx.outputs()) {
    REQUIRE(t.device().type == af::DeviceType::GPU);
    auto back = af::copy_to_host(t);
    REQUIRE_MESSAGE(back.ok(), back.status().to_string());
    outs->push_back(*back);
  }
  return s;
}

std::vector<af::Tensor> run_gpu(const af::Node& n, const std::vector<af::Tensor>& inputs, std::vector<bool> host = {}) {
  auto k = af::KernelRegistry::global().create(n, af::DeviceType::GPU);
  REQUIRE_MESSAGE(k.ok(), k.status().to_string());
  std::vector<af::Tensor> outs;
  af::Status s = try_gpu_kernel(**k, n, inputs, &outs, std::move(host));
  REQUIRE_MESSAGE(s.ok(), s.to_string());
  return outs;
}

// |gpu - cpu| <= atol + rtol * |cpu| elementwise, NaNs in the same places.
void check_close(const af::Tensor& gpu, const af::Tensor& cpu, double rtol, double atol, const std::string& what) {
  INFO(what);
  REQUIRE(gpu.shape() == cpu.shape());
  REQUIRE(gpu.dtype() == af::DType::f32);
  const float* g = gpu.data<float>();
  const float* c = cpu.data<float>();
  int64_t bad = 0, first = -1;
  double worst = 0;
  for (int64_t i = 0; i < cpu.num_elements(); ++i) {
    const double diff = std::fabs(double(g[i]) - double(c[i]));
    const bool ok = (std::isnan(g[i]) && std::isnan(c[i])) || diff <= atol + rtol * std::fabs(double(c[i]));
    if (!ok && bad++ == 0) first = i;
    if (diff > worst) worst = diff;
  }
  CHECK_MESSAGE(bad == 0, bad << " of " << cpu.num_elements() << " elements differ (largest difference " << worst
                              << "); first at " << first << ": gpu " << (first >= 0 ? g[first] : 0.f) << " vs cpu "
                              << (first >= 0 ? c[first] : 0.f));
}

std::string describe(const std::string& op, const std::vector<af::Tensor>& inputs, const std::string& extra = "") {
  std::string w = op;
  for (auto& t : inputs) w += " " + t.shape().to_string();
  return w + (extra.empty() ? "" : " " + extra);
}

// Every output of `op` within (rtol, atol[output]).
void compare(const std::string& op, const std::vector<af::Tensor>& inputs, double rtol, std::vector<double> atol,
             std::map<std::string, af::AttrValue> attrs = {}, std::vector<bool> host = {}, const std::string& extra = "") {
  af::Graph g;
  const af::Node& n = make_node(g, op, inputs, std::move(attrs));
  auto gpu = run_gpu(n, inputs, std::move(host));
  auto cpu = run_cpu(n, inputs);
  REQUIRE(gpu.size() == cpu.size());
  for (size_t i = 0; i < cpu.size(); ++i)
    check_close(gpu[i], cpu[i], rtol, atol[std::min(i, atol.size() - 1)],
                describe(op, inputs, extra) + " output " + std::to_string(i));
}

}  // namespace

TEST_CASE("the cuDNN group's GPU kernels are registered exactly when the build has CUDA and cuDNN") {
  for (const char* op : {"Conv2D", "Conv2DBackpropInput", "Conv2DBackpropFilter", "MaxPool", "AvgPool", "MaxPoolGrad",
                         "AvgPoolGrad", "FusedBatchNorm", "FusedBatchNormGrad", "Dropout"})
    CHECK_MESSAGE(af::KernelRegistry::global().has(op, af::DeviceType::GPU) == (af::built_with_cuda() && kHaveCudnn), op);
  // The batch norm reads is_training on the host: placement keeps that input there.
  CHECK(af::gpu_input_in_host_memory("FusedBatchNorm", 5));
  CHECK(af::gpu_input_in_host_memory("FusedBatchNormGrad", 7));
  CHECK_FALSE(af::gpu_input_in_host_memory("FusedBatchNorm", 0));
  CHECK_FALSE(af::gpu_input_in_host_memory("FusedBatchNormGrad", 1));
  CHECK_FALSE(af::gpu_input_in_host_memory("Dropout", 1));  // read on the device
}

TEST_CASE("needs a GPU: Conv2D and its gradients match the CPU (rtol 1e-4, atol 2e-6 per summed product)") {
  require_gpu();
  struct Case {
    af::Shape x, f;
    int64_t stride;
    const char* padding;
  };
  const std::vector<Case> cases = {
      {{2, 7, 7, 3}, {3, 3, 3, 4}, 1, "SAME"},        {{2, 7, 7, 3}, {3, 3, 3, 4}, 1, "VALID"},
      {{2, 8, 9, 3}, {3, 3, 3, 5}, 2, "SAME"},        // uneven SAME (pad 0 before, 1 after)
      {{1, 8, 8, 2}, {4, 4, 2, 3}, 1, "SAME"},        // uneven SAME (1 before, 2 after)
      {{3, 6, 5, 4}, {2, 3, 4, 2}, 2, "VALID"},       {{2, 5, 5, 8}, {1, 1, 8, 6}, 1, "VALID"},
      {{16, 28, 28, 1}, {5, 5, 1, 32}, 1, "SAME"},    // the CNN sample's conv1
      {{8, 14, 14, 32}, {5, 5, 32, 64}, 1, "SAME"},   // and conv2, on a smaller batch
  };
  uint32_t seed = 1;
  for (const Case& c : cases) {
    af::Tensor x = random_tensor(c.x, seed++);
    af::Tensor f = random_tensor(c.f, seed++);
    const std::map<std::string, af::AttrValue> attrs = {{"strides", af::AttrValue::Ints{c.stride, c.stride}},
                                                       {"padding", std::string(c.padding)}};
    const std::string extra = std::string(c.padding) + " stride " + std::to_string(c.stride);
    const double k = double(c.f.dim(0) * c.f.dim(1) * c.f.dim(2));
    compare("Conv2D", {x, f}, 1e-4, {2e-6 * k + 1e-6}, attrs, {}, extra);
    af::Graph g;
    const af::Node& conv = make_node(g, "Conv2D", {x, f}, attrs);
    af::Tensor y = run_cpu(conv, {x, f})[0];
    af::Tensor dy = random_tensor(y.shape(), seed++);
    // dx sums over KH*KW*O products, dW over N*OH*OW.
    const double kd = double(c.f.dim(0) * c.f.dim(1) * c.f.dim(3));
    const double kf = double(y.dim(0) * y.dim(1) * y.dim(2));
    compare("Conv2DBackpropInput", {x, f, dy}, 1e-4, {2e-6 * kd + 1e-6}, attrs, {}, extra);
    compare("Conv2DBackpropFilter", {x, f, dy}, 1e-4, {2e-6 * kf + 1e-6}, attrs, {}, extra);
  }
  // Empty inputs give zeros, as on the CPU.
  compare("Conv2D", {random_tensor({1, 4, 4, 0}, 90), random_tensor({3, 3, 0, 2}, 91)}, 0, {0},
          {{"strides", af::AttrValue::Ints{1, 1}}, {"padding", std::string("SAME")}});
}

TEST_CASE("needs a GPU: MaxPool/AvgPool and their gradients match the CPU (max: exact, ties included; avg: rtol 1e-6, atol 1e-6)") {
  require_gpu();
  struct Case {
    af::Shape x;
    int64_t k, s;
    const char* padding;
  };
  const std::vector<Case> cases = {
      {{4, 28, 28, 32}, 2, 2, "SAME"},  // the CNN sample's pool1
      {{4, 14, 14, 64}, 2, 2, "SAME"},  // and pool2
      {{2, 8, 8, 3}, 3, 2, "SAME"},     // uneven SAME (0 before, 1 after), overlapping windows
      {{2, 5, 6, 3}, 2, 1, "SAME"},     // uneven SAME, stride 1
      {{2, 7, 7, 5}, 3, 1, "VALID"},    {{1, 9, 9, 2}, 3, 3, "VALID"}, {{2, 3, 3, 2}, 5, 2, "SAME"},  // window > input
  };
  uint32_t seed = 200;
  for (const Case& c : cases) {
    const std::map<std::string, af::AttrValue> attrs = {{"ksize", af::AttrValue::Ints{c.k, c.k}},
                                                       {"strides", af::AttrValue::Ints{c.s, c.s}},
                                                       {"padding", std::string(c.padding)}};
    const std::string extra = "k" + std::to_string(c.k) + " s" + std::to_string(c.s) + " " + c.padding;
    for (bool ties : {false, true}) {
      af::Tensor x = ties ? tie_tensor(c.x, seed++) : random_tensor(c.x, seed++);
      compare("MaxPool", {x}, 0, {0}, attrs, {}, extra);
      compare("AvgPool", {x}, 1e-6, {1e-6}, attrs, {}, extra);
      af::Graph g;
      const af::Node& mp = make_node(g, "MaxPool", {x}, attrs);
      af::Tensor y = run_cpu(mp, {x})[0];
      af::Tensor dy = random_tensor(y.shape(), seed++);
      compare("MaxPoolGrad", {x, y, dy}, 0, {0}, attrs, {}, extra + (ties ? " ties" : ""));
      compare("AvgPoolGrad", {x, dy}, 1e-6, {1e-6}, attrs, {}, extra);
    }
  }
}

TEST_CASE("needs a GPU: FusedBatchNorm matches the CPU, training and inference (y: rtol 1e-4, atol 1e-4; stats: rtol 1e-4, atol 1e-5)") {
  require_gpu();
  uint32_t seed = 300;
  for (af::Shape s : {af::Shape{256, 100}, af::Shape{16, 14, 14, 32}, af::Shape{2, 3}}) {
    const int64_t C = s.dim(s.rank() - 1);
    // A mean far from 0 (x in [2, 4]): the statistics must not cancel.
    af::Tensor x = random_tensor(s, seed++, 2.f, 4.f);
    af::Tensor scale = random_tensor({C}, seed++, 0.5f, 1.5f);
    af::Tensor offset = random_tensor({C}, seed++);
    af::Tensor mean = random_tensor({C}, seed++, 2.f, 4.f);
    af::Tensor var = random_tensor({C}, seed++, 0.1f, 1.f);
    for (double eps : {0.001, 1e-5}) {
      const std::string extra = "epsilon " + std::to_string(eps);
      compare("FusedBatchNorm", {x, scale, offset, mean, var}, 1e-4, {1e-4, 1e-5, 1e-5},
              {{"epsilon", eps}, {"is_training", true}}, {}, extra + " training");
      compare("FusedBatchNorm", {x, scale, offset, mean, var}, 1e-4, {1e-4, 0, 0},
              {{"epsilon", eps}, {"is_training", false}}, {}, extra + " inference");
    }
    // is_training as a host input overrides the attribute.
    compare("FusedBatchNorm", {x, scale, offset, mean, var, scalar_bool(false)}, 1e-4, {1e-4, 0, 0},
            {{"is_training", true}}, {false, false, false, false, false, true}, "is_training input false");
  }
}

TEST_CASE("needs a GPU: FusedBatchNormGrad matches the CPU, training and inference (rtol 1e-3, atol 1e-4 + 2e-6 per summed row)") {
  require_gpu();
  uint32_t seed = 400;
  for (af::Shape s : {af::Shape{256, 100}, af::Shape{16, 14, 14, 32}, af::Shape{5, 3}}) {
    const int64_t C = s.dim(s.rank() - 1);
    const int64_t M = s.num_elements() / C;
    af::Tensor dy = random_tensor(s, seed++);
    af::Tensor x = random_tensor(s, seed++, 2.f, 4.f);
    af::Tensor scale = random_tensor({C}, seed++, 0.5f, 1.5f);
    af::Tensor mean = random_tensor({C}, seed++, 2.f, 4.f);
    af::Tensor var = random_tensor({C}, seed++, 0.1f, 1.f);
    af::Tensor gm = random_tensor({C}, seed++);
    af::Tensor gv = random_tensor({C}, seed++);
    const double sums = 1e-4 + 2e-6 * double(M);
    for (bool training : {true, false}) {
      const std::map<std::string, af::AttrValue> attrs = {{"epsilon", 0.001}, {"is_training", training}};
      const std::string extra = training ? "training" : "inference";
      compare("FusedBatchNormGrad", {dy, x, scale, mean, var}, 1e-3, {1e-4, sums, sums, sums, sums}, attrs, {}, extra);
      compare("FusedBatchNormGrad", {dy, x, scale, mean, var, gm, gv}, 1e-3, {1e-4, sums, sums, sums, sums}, attrs, {},
              extra + " with batch-stat gradients");
    }
  }
}

TEST_CASE("needs a GPU: Dropout draws the CPU kernel's masks run after run (exact)") {
  require_gpu();
  for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{64 * 1024 + 3}}) {
    af::Tensor x = random_tensor({n}, 500 + static_cast<uint32_t>(n));
    af::Graph g;
    const af::Node& node = make_node(g, "Dropout", {x}, {{"keep_prob", 0.7}, {"seed", int64_t{5}}, {"seed2", int64_t{9}}});
    auto cpu_k = af::KernelRegistry::global().create(node, af::DeviceType::CPU);
    auto gpu_k = af::KernelRegistry::global().create(node, af::DeviceType::GPU);
    REQUIRE(cpu_k.ok());
    REQUIRE(gpu_k.ok());
    // Successive runs of one kernel draw successive blocks: the i-th masks agree.
    for (int run = 0; run < 3; ++run) {
      auto cpu = run_cpu_kernel(**cpu_k, node, {x});
      std::vector<af::Tensor> gpu;
      af::Status s = try_gpu_kernel(**gpu_k, node, {x}, &gpu);
      REQUIRE_MESSAGE(s.ok(), s.to_string());
      INFO("n " << n << " run " << run);
      CHECK(gpu[1].equals(cpu[1]));
      CHECK(gpu[0].equals(cpu[0]));
    }
  }
  // training = false (on the host and on the device): y = x, ones, and no blocks drawn,
  // so the next training run still matches the CPU's first.
  af::Tensor x = random_tensor({1001}, 77);
  for (bool flag_on_host : {true, false}) {
    af::Graph g;
    const af::Node& node =
        make_node(g, "Dropout", {x, scalar_bool(true)}, {{"keep_prob", 0.5}, {"seed", int64_t{3}}, {"seed2", int64_t{4}}});
    auto gpu_k = af::KernelRegistry::global().create(node, af::DeviceType::GPU);
    REQUIRE(gpu_k.ok());
    std::vector<af::Tensor> gpu;
    af::Status s = try_gpu_kernel(**gpu_k, node, {x, scalar_bool(false)}, &gpu, {false, flag_on_host});
    REQUIRE_MESSAGE(s.ok(), s.to_string());
    INFO("flag on the host: " << flag_on_host);
    CHECK(gpu[0].equals(x));
    CHECK(gpu[1].equals(af::Tensor::from_vector(std::vector<float>(1001, 1.f), af::Shape{1001})));
    auto cpu = run_cpu(node, {x, scalar_bool(true)});
    s = try_gpu_kernel(**gpu_k, node, {x, scalar_bool(true)}, &gpu, {false, flag_on_host});
    REQUIRE_MESSAGE(s.ok(), s.to_string());
    CHECK(gpu[1].equals(cpu[1]));
    CHECK(gpu[0].equals(cpu[0]));
  }
}

TEST_CASE("needs a GPU: cuDNN-group kernel errors are Status values naming the node and op") {
  require_gpu();
  // Channels that do not match the filter.
  af::Graph g;
  // (The graph's shape checks would refuse such a node: it is built for 2 channels and
  // given 3 at run time.)
  af::Tensor x = random_tensor({1, 4, 4, 3}, 1), f = random_tensor({3, 3, 2, 4}, 2);
  const af::Node& conv = make_node(g, "Conv2D", {random_tensor({1, 4, 4, 2}, 1), f},
                                   {{"strides", af::AttrValue::Ints{1, 1}}, {"padding", std::string("SAME")}});
  auto k = af::KernelRegistry::global().create(conv, af::DeviceType::GPU);
  REQUIRE(k.ok());
  std::vector<af::Tensor> outs;
  af::Status s = try_gpu_kernel(**k, conv, {x, f}, &outs);
  CHECK(s.code() == af::Code::invalid_argument);
  CHECK_MESSAGE(s.message().find(conv.name) != std::string::npos, s.to_string());
  CHECK_MESSAGE(s.message().find("Conv2D") != std::string::npos, s.to_string());
  CHECK_MESSAGE(s.message().find("channels") != std::string::npos, s.to_string());
  // is_training in device memory: the batch norm would have to block to read it.
  af::Tensor bx = random_tensor({8, 2}, 3), v = random_tensor({2}, 4, 0.5f, 1.f);
  const af::Node& bn = make_node(g, "FusedBatchNorm", {bx, v, v, v, v, scalar_bool(true)});
  auto kb = af::KernelRegistry::global().create(bn, af::DeviceType::GPU);
  REQUIRE(kb.ok());
  s = try_gpu_kernel(**kb, bn, {bx, v, v, v, v, scalar_bool(true)}, &outs);
  CHECK(s.code() == af::Code::unimplemented);
  CHECK_MESSAGE(s.message().find("is_training") != std::string::npos, s.to_string());
  // An out_backprop that is not shaped like the convolution's output.
  af::Tensor f2 = random_tensor({3, 3, 3, 4}, 5), dy = random_tensor({1, 3, 3, 4}, 6);
  const af::Node& bf = make_node(g, "Conv2DBackpropFilter", {x, f2, random_tensor({1, 4, 4, 4}, 6)},
                                 {{"strides", af::AttrValue::Ints{1, 1}}, {"padding", std::string("SAME")}});
  auto kf = af::KernelRegistry::global().create(bf, af::DeviceType::GPU);
  REQUIRE(kf.ok());
  s = try_gpu_kernel(**kf, bf, {x, f2, dy}, &outs);
  CHECK(s.code() == af::Code::invalid_argument);
  CHECK_MESSAGE(s.message().find("out_backprop") != std::string::npos, s.to_string());
}
