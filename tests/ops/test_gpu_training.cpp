// The GPU training kernels (ops/cuda/gpu_training.cpp, gpu_host_kernels.cpp),
// each against its CPU kernel on random inputs with the tolerance stated in its case; the
// MLP's gradients in a session on /gpu:0 against the CPU's; and the Fashion-MNIST MLP
// trained on the GPU reaching the CPU's test accuracy within 0.5 points. Without a GPU
// each case prints "GPU tests skipped: no device" and CTest reports it skipped
// (AF_REQUIRE_GPU=1 makes that a failure).
#include <doctest/doctest.h>

#include <actorflow/actorflow.h>
#include <actorflow/ops/cuda_info.h>
#include <actorflow/ops/gpu.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <random>

#include "actorflow/kernel.h"
#include "actorflow/ops/cpu_device.h"
#include "actorflow/resource_mgr.h"
#include "kit/datasets.h"
#include "kit/flags.h"
#include "gpu_kernel_harness.h"
#include "interop/skip.h"
#include "kit/models.h"
#include "test_util.h"
#include "kit/trainer.h"

namespace af = actorflow;
namespace fs = std::filesystem;

namespace {

using aft::make_node;
using aft::random_f32;
using aft::require_gpu;

template <typename T>
af::Tensor random_ints(af::Shape s, uint32_t seed, int64_t lo, int64_t hi) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int64_t> u(lo, hi);
  std::vector<T> v(static_cast<size_t>(s.num_elements()));
  for (T& x : v) x = static_cast<T>(u(rng));
  return af::Tensor::from_vector(v, std::move(s));
}

std::vector<af::Tensor> run_cpu(const af::Node& n, const std::vector<af::Tensor>& inputs, af::ResourceMgr* rm = nullptr) {
  auto k = af::KernelRegistry::global().create(n, af::DeviceType::CPU);
  REQUIRE_MESSAGE(k.ok(), k.status().to_string());
  af::OpKernelContext ctx(n, inputs, af::default_cpu_device(), rm, 1);
  af::Status s = af::run_kernel_blocking(**k, ctx);
  REQUIRE_MESSAGE(s.ok(), s.to_string());
  std::vector<af::Tensor> out;
  for (int i = 0; i < n.num_outputs(); ++i) out.push_back(ctx.output(i));
  return out;
}

af::Tensor to_gpu(const af::Tensor& t) {
  auto c = af::copy_to_gpu(t, 0);
  REQUIRE_MESSAGE(c.ok(), c.status().to_string());
  return *c;
}

af::Tensor to_host(const af::Tensor& t) {
  if (t.device().type == af::DeviceType::CPU) return t;
  auto c = af::copy_to_host(t);
  REQUIRE_MESSAGE(c.ok(), c.status().to_string());
  return *c;
}

// The node on gpu:0 (inputs copied over unless `host_inputs` names them), its outputs back
// on the host; the status when it fails.
af::Status try_gpu(const af::Node& n, const std::vector<af::Tensor>& inputs, std::vector<af::Tensor>* out,
                   af::ResourceMgr* rm = nullptr, std::set<int> host_inputs = {}) {
  auto dev = af::gpu_device_context(0);
  REQUIRE_MESSAGE(dev.ok(), dev.status().to_string());
  std::vector<af::Tensor> on_gpu;
  for (size_t i = 0; i < inputs.size(); ++i)
    on_gpu.push_back(host_inputs.count(static_cast<int>(i)) ? inputs[i] : to_gpu(inputs[i]));
  auto k = af::KernelRegistry::global().create(n, af::DeviceType::GPU);
  REQUIRE_MESSAGE(k.ok(), k.status().to_string());
  af::OpKernelContext ctx(n, on_gpu, *dev, rm, 1);
  af::Status s = af::run_kernel_blocking(**k, ctx);
  REQUIRE_MESSAGE(s.code() != af::Code::deadline_exceeded, s.to_string());
  if (!s.ok()) return s;
  out->clear();
  for (int i = 0; i < n.num_outputs(); ++i) {
    CHECK(ctx.output(i).device().type == af::DeviceType::GPU);
    out->push_back(to_host(ctx.output(i)));
  }
  return s;
}

std::vector<af::Tensor> run_gpu(const af::Node& n, const std::vector<af::Tensor>& inputs) {
  std::vector<af::Tensor> out;
  af::Status s = try_gpu(n, inputs, &out);
  REQUIRE_MESSAGE(s.ok(), s.to_string());
  return out;
}

// |gpu - cpu| <= atol + rtol * |cpu| elementwise (floats), equal elsewhere; NaNs alike.
void check_close(const af::Tensor& gpu, const af::Tensor& cpu, double rtol, double atol, const std::string& what) {
  INFO(what);
  REQUIRE(gpu.shape() == cpu.shape());
  REQUIRE(gpu.dtype() == cpu.dtype());
  if (cpu.dtype() != af::DType::f32) {
    CHECK(gpu.equals(cpu));
    return;
  }
  const float* g = gpu.data<float>();
  const float* c = cpu.data<float>();
  int64_t bad = 0, first = -1;
  for (int64_t i = 0; i < cpu.num_elements(); ++i) {
    const bool ok = (std::isnan(g[i]) && std::isnan(c[i])) ||
                    std::fabs(double(g[i]) - double(c[i])) <= atol + rtol * std::fabs(double(c[i]));
    if (!ok && bad++ == 0) first = i;
  }
  CHECK_MESSAGE(bad == 0, bad << " elements differ; first at " << first << ": gpu " << (first >= 0 ? g[first] : 0.f)
                              << " vs cpu " << (first >= 0 ? c[first] : 0.f));
}

void compare(const std::string& op, const std::vector<af::Tensor>& inputs, double rtol, double atol,
             std::map<std::string, af::AttrValue> attrs = {}) {
  af::Graph g;
  const af::Node& n = make_node(g, op, inputs, std::move(attrs));
  std::string what = op;
  for (auto& t : inputs) what += " " + t.type_string();
  auto gpu = run_gpu(n, inputs);
  auto cpu = run_cpu(n, inputs);
  REQUIRE(gpu.size() == cpu.size());
  for (size_t i = 0; i < gpu.size(); ++i) check_close(gpu[i], cpu[i], rtol, atol, what + " output " + std::to_string(i));
}

}  // namespace

TEST_CASE("needs a GPU: softmax cross-entropy, sparse and dense, matches the CPU (rtol 1e-5, atol 1e-6)") {
  require_gpu();
  uint32_t seed = 1;
  for (af::Shape s : {af::Shape{64, 10}, af::Shape{7, 1000}, af::Shape{1, 3}, af::Shape{0, 10}, af::Shape{300, 257}}) {
    af::Tensor logits = random_f32(s, seed++, -8.f, 8.f);
    af::Shape rows{s.dim(0)};
    compare("SparseSoftmaxCrossEntropyWithLogits", {logits, random_ints<int32_t>(rows, seed++, 0, s.dim(1) - 1)}, 1e-5, 1e-6);
    compare("SparseSoftmaxCrossEntropyWithLogits", {logits, random_ints<int64_t>(rows, seed++, 0, s.dim(1) - 1)}, 1e-5, 1e-6);
    // Dense labels: random rows of probabilities.
    af::Tensor labels = random_f32(s, seed++, 0.f, 1.f);
    float* z = labels.data<float>();
    for (int64_t r = 0; r < s.dim(0); ++r) {
      double sum = 0;
      for (int64_t j = 0; j < s.dim(1); ++j) sum += z[r * s.dim(1) + j];
      for (int64_t j = 0; j < s.dim(1); ++j) z[r * s.dim(1) + j] = static_cast<float>(z[r * s.dim(1) + j] / sum);
    }
    compare("SoftmaxCrossEntropyWithLogits", {logits, labels}, 1e-5, 1e-5);
  }
}

TEST_CASE("needs a GPU: a label outside the classes fails the node, as on the CPU") {
  require_gpu();
  af::Tensor logits = random_f32({4, 10}, 3);
  af::Tensor labels = af::Tensor::from_vector<int64_t>({1, 2, 10, 3});
  af::Graph g;
  const af::Node& n = make_node(g, "SparseSoftmaxCrossEntropyWithLogits", {logits, labels});
  std::vector<af::Tensor> out;
  af::Status s = try_gpu(n, {logits, labels}, &out);
  CHECK(s.code() == af::Code::out_of_range);
  CHECK(s.message().find("outside [0, 10)") != std::string::npos);
}

TEST_CASE("needs a GPU: BiasAddGrad matches the CPU (rtol 1e-4, atol 1e-4)") {
  require_gpu();
  compare("BiasAddGrad", {random_f32({64, 256}, 5)}, 1e-4, 1e-4);
  compare("BiasAddGrad", {random_f32({8, 7, 7, 32}, 6)}, 1e-4, 1e-4);
  compare("BiasAddGrad", {random_f32({8, 32, 7, 7}, 7)}, 1e-4, 1e-4, {{"data_format", std::string("NCHW")}});
  compare("BiasAddGrad", {random_f32({10000, 3}, 8)}, 1e-4, 1e-3);
  compare("BiasAddGrad", {random_f32({0, 5}, 9)}, 0, 0);
}

TEST_CASE("needs a GPU: comparisons, Select, BroadcastReduced and SumToShapeOf match the CPU (exact, sums rtol 1e-4)") {
  require_gpu();
  uint32_t seed = 20;
  for (const char* op : {"Greater", "GreaterEqual", "Less", "LessEqual"}) {
    compare(op, {random_f32({64, 256}, seed++), af::Tensor::scalar(0.0f)}, 0, 0);
    compare(op, {random_f32({3, 4}, seed++), random_f32({4}, seed++)}, 0, 0);
  }
  // The relu gradient: where(x > 0, g, 0).
  af::Tensor x = random_f32({64, 256}, seed++);
  std::vector<bool> cond(static_cast<size_t>(x.num_elements()));
  for (int64_t i = 0; i < x.num_elements(); ++i) cond[static_cast<size_t>(i)] = x.data<float>()[i] > 0;
  af::Tensor c(af::DType::boolean, x.shape());
  for (int64_t i = 0; i < x.num_elements(); ++i) c.data<bool>()[i] = cond[static_cast<size_t>(i)];
  compare("Select", {c, random_f32({64, 256}, seed++), af::Tensor::scalar(0.0f)}, 0, 0);
  compare("Select", {c, random_f32({64, 256}, seed++), random_f32({64, 256}, seed++)}, 0, 0);
  for (bool mean : {false, true}) {
    compare("BroadcastReduced", {random_f32({}, seed++), random_f32({64}, seed++)}, 1e-6, 0,
            {{"axes", af::AttrValue::Ints{}}, {"mean", mean}});
    compare("BroadcastReduced", {random_f32({4, 6}, seed++), random_f32({4, 5, 6}, seed++)}, 1e-6, 0,
            {{"axes", af::AttrValue::Ints{1}}, {"mean", mean}});
    compare("BroadcastReduced", {random_f32({5}, seed++), random_f32({4, 5, 6}, seed++)}, 1e-6, 0,
            {{"axes", af::AttrValue::Ints{0, -1}}, {"mean", mean}});
  }
  compare("SumToShapeOf", {random_f32({16, 10}, seed++), random_f32({16, 10}, seed++)}, 0, 0);
  compare("SumToShapeOf", {random_f32({16, 10}, seed++), random_f32({10}, seed++)}, 1e-4, 1e-4);
  compare("SumToShapeOf", {random_f32({3, 16, 10}, seed++), random_f32({16, 1}, seed++)}, 1e-4, 1e-4);
}

TEST_CASE("needs a GPU: Cast, ZerosLike and OnesLike match the CPU (exact)") {
  require_gpu();
  af::Tensor f = random_f32({1000}, 40, -100.f, 100.f);
  for (af::DType to : {af::DType::i32, af::DType::i64, af::DType::boolean, af::DType::f32})
    compare("Cast", {f}, 0, 0, {{"dtype", to}});
  compare("Cast", {random_ints<int32_t>({100}, 41, -50, 50)}, 0, 0, {{"dtype", af::DType::f32}});
  compare("Cast", {random_ints<int64_t>({100}, 42, -50, 50)}, 0, 0, {{"dtype", af::DType::f32}});
  compare("ZerosLike", {f}, 0, 0);
  compare("OnesLike", {random_f32({7, 3}, 43)}, 0, 0);
}

// One initializer's tensor feeding several variables (the Adam slots' zeros, merged into
// one node) is held elsewhere when Assign stores it: the variable gets a device copy of its
// own, and the host never reads the device buffer.
TEST_CASE("needs a GPU: Assign of a device value held elsewhere stores a copy of its own") {
  require_gpu();
  af::Graph g;
  const af::Tensor w0 = random_f32({33, 65}, 91);
  (void)af::variable(g, w0, "a");
  const af::Node& n = make_node(g, "Assign", {w0}, {{"variable", std::string("a")}});
  auto dev = af::gpu_device_context(0);
  REQUIRE_MESSAGE(dev.ok(), dev.status().to_string());
  const af::Tensor shared = to_gpu(w0);
  auto k = af::KernelRegistry::global().create(n, af::DeviceType::GPU);
  REQUIRE_MESSAGE(k.ok(), k.status().to_string());
  af::ResourceMgr rm;
  af::OpKernelContext ctx(n, {shared}, *dev, &rm, 1);  // `shared` keeps a second reference
  af::Status s = af::run_kernel_blocking(**k, ctx);
  REQUIRE_MESSAGE(s.ok(), s.to_string());
  const af::Tensor& stored = rm.variable("a")->value;
  CHECK(stored.device().type == af::DeviceType::GPU);
  CHECK(stored.raw_data() != shared.raw_data());
  CHECK(to_host(stored).equals(w0));
}

TEST_CASE("needs a GPU: initializers give the CPU's values bit for bit (same Philox streams)") {
  require_gpu();
  for (const char* op : {"RandomNormal", "RandomUniform", "TruncatedNormal"}) {
    af::Graph g;
    g.set_seed(7);
    af::NodeSpec spec;
    spec.op = op;
    spec.attrs = {{"shape", af::Shape{300, 50}}, {"seed", int64_t{3}}};
    auto r = g.add_node(std::move(spec));
    REQUIRE_MESSAGE(r.ok(), r.status().to_string());
    const af::Node& n = r->node();
    auto gpu = run_gpu(n, {});
    auto cpu = run_cpu(n, {});
    CHECK_MESSAGE(gpu[0].equals(cpu[0]), op);
  }
  af::Graph g;
  af::NodeSpec spec;
  spec.op = "Fill";
  spec.attrs = {{"shape", af::Shape{4, 5}}, {"value", 0.25}};
  auto r = g.add_node(std::move(spec));
  REQUIRE(r.ok());
  CHECK(run_gpu(r->node(), {})[0].equals(run_cpu(r->node(), {})[0]));
}

TEST_CASE("needs a GPU: every optimizer's dense update matches the CPU's (rtol 1e-5, atol 1e-6, Ftrl 1e-5, 3 steps)") {
  require_gpu();
  struct Case {
    const char* op;
    std::vector<const char*> slots;
    std::vector<double> scalars;  // hyperparameters in input order, gradient left out
    int grad;
    bool nesterov;
    // Ftrl's linear slot adds (new_accum^-p - accum^-p) / lr * w: a difference of two
    // near-equal powers (CUDA's powf is good to 2 ulp, glibc's to 1) scaled by 1/lr = 20,
    // so it is good to about 1e-5, not the 1e-6 of the other rules.
    double atol = 1e-6;
  };
  const std::vector<Case> cases = {
      {"ApplyGradientDescent", {}, {0.1}, 1, false},
      {"ApplyMomentum", {"accum"}, {0.1, 0.9}, 1, false},
      {"ApplyMomentum", {"accum"}, {0.1, 0.9}, 1, true},
      {"ApplyAdagrad", {"accum"}, {0.1}, 1, false},
      {"ApplyAdadelta", {"accum", "accum_update"}, {1.0, 0.95, 1e-6}, 3, false},
      {"ApplyRMSProp", {"ms", "mom"}, {0.01, 0.9, 0.5, 1e-7}, 4, false},
      {"ApplyAdam", {"m", "v"}, {0.9, 0.999, 0.001, 0.9, 0.999, 1e-7}, 6, false},
      {"ApplyAdam", {"m", "v"}, {0.81, 0.998, 0.001, 0.9, 0.999, 1e-7}, 6, true},
      {"ApplyFtrl", {"accum", "linear"}, {0.05, 0.01, 0.02, -0.5}, 0, false, 1e-5},
      {"ApplyFtrl", {"accum", "linear"}, {0.05, 0.0, 0.0, -0.7}, 0, false, 1e-5},
  };
  const af::Shape shape{33, 65};
  uint32_t seed = 50;
  for (const Case& c : cases) {
    const std::string rule = std::string(c.op) + (c.nesterov ? " (nesterov)" : "");
    INFO(rule);
    af::Graph g;
    std::map<std::string, af::AttrValue> attrs = {{"variable", std::string("w")}};
    for (const char* s : c.slots) attrs[s] = std::string(s) + "_slot";
    if (c.nesterov) attrs["use_nesterov"] = true;
    // Variables first, so the op's shape function finds them.
    auto w0 = random_f32(shape, seed++);
    std::vector<af::Tensor> slot0;
    for (size_t i = 0; i < c.slots.size(); ++i) slot0.push_back(random_f32(shape, seed++, 0.1f, 1.f));
    (void)af::variable(g, w0, "w");
    for (size_t i = 0; i < c.slots.size(); ++i) (void)af::variable(g, slot0[i], std::string(c.slots[i]) + "_slot");
    std::vector<af::Tensor> inputs;
    std::set<int> host;
    size_t k = 0;
    af::Tensor grad = random_f32(shape, seed++);
    for (int i = 0; i < static_cast<int>(c.scalars.size()) + 1; ++i) {
      if (i == c.grad) {
        inputs.push_back(grad);
      } else {
        inputs.push_back(af::Tensor::scalar(static_cast<float>(c.scalars[k++])));
        host.insert(i);
      }
    }
    const af::Node& n = make_node(g, c.op, inputs, attrs);
    af::ResourceMgr cpu_rm, gpu_rm;
    auto set = [&](af::ResourceMgr& rm, const std::string& name, const af::Tensor& v, bool gpu) {
      auto var = rm.variable(name);
      var->value = gpu ? to_gpu(v) : v.clone();
    };
    set(cpu_rm, "w", w0, false);
    set(gpu_rm, "w", w0, true);
    for (size_t i = 0; i < c.slots.size(); ++i) {
      set(cpu_rm, std::string(c.slots[i]) + "_slot", slot0[i], false);
      set(gpu_rm, std::string(c.slots[i]) + "_slot", slot0[i], true);
    }
    for (int step = 0; step < 3; ++step) {
      (void)run_cpu(n, inputs, &cpu_rm);
      std::vector<af::Tensor> out;
      af::Status s = try_gpu(n, inputs, &out, &gpu_rm, host);
      REQUIRE_MESSAGE(s.ok(), s.to_string());
    }
    check_close(to_host(gpu_rm.variable("w")->value), cpu_rm.variable("w")->value, 1e-5, c.atol, "w");
    for (const char* s : c.slots) {
      const std::string name = std::string(s) + "_slot";
      check_close(to_host(gpu_rm.variable(name)->value), cpu_rm.variable(name)->value, 1e-5, c.atol, name);
    }
  }
}

namespace {

struct MlpGraph {
  af::Graph g;
  kit::Model m;
  std::vector<af::Output> vars;
  std::vector<af::Output> grads;
};

void build_mlp(MlpGraph& t, const std::string& device) {
  kit::Flags f = kit::sample_defaults("fashion_mnist");
  f.model_network = "256 128";
  af::DeviceScope scope(t.g, device);
  t.g.set_seed(1);
  t.m = kit::fashion_mnist_model(t.g, f);
  for (int id : t.g.collection("trainable_variables")) t.vars.emplace_back(&t.g, id, 0);
  t.grads = af::gradients({t.m.loss}, t.vars);
}

// n_train + n_test rows of 784 pixels in [0, 1]: a per-class template plus noise.
kit::Split synthetic_fashion_mnist(int64_t n_train, int64_t n_test) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(0.f, 1.f);
  std::vector<float> templates(10 * 784);
  for (float& t : templates) t = u(rng);
  auto make = [&](int64_t n, af::Tensor* x, af::Tensor* y) {
    std::vector<float> xv(static_cast<size_t>(n * 784));
    std::vector<int64_t> yv(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      const int64_t c = static_cast<int64_t>(rng() % 10);
      yv[static_cast<size_t>(i)] = c;
      for (int64_t j = 0; j < 784; ++j)
        xv[static_cast<size_t>(i * 784 + j)] = 0.12f * templates[static_cast<size_t>(c * 784 + j)] + 0.88f * u(rng);
    }
    *x = af::Tensor::from_vector(xv, {n, 784});
    *y = af::Tensor::from_vector(yv, {n});
  };
  kit::Split s;
  make(n_train, &s.x_train, &s.y_train);
  make(n_test, &s.x_test, &s.y_test);
  return s;
}

}  // namespace

TEST_CASE("needs a GPU: the MLP's loss and gradients on /gpu:0 match the CPU's (rtol 1e-3, atol 1e-5)") {
  require_gpu();
  MlpGraph gpu, cpu;
  build_mlp(gpu, "/gpu:0");
  build_mlp(cpu, "");
  std::vector<float> xv(64 * 784);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(0.f, 1.f);
  for (float& v : xv) v = u(rng);
  af::Tensor x = af::Tensor::from_vector(xv, {64, 784});
  af::Tensor y = random_ints<int64_t>({64}, 4, 0, 9);
  std::vector<std::vector<af::Tensor>> results;
  for (MlpGraph* t : {&gpu, &cpu}) {
    auto sess = af::Session::create(t->g);
    REQUIRE_MESSAGE(sess.ok(), sess.status().to_string());
    af::Status init = sess->run_init();
    REQUIRE_MESSAGE(init.ok(), init.to_string());
    std::vector<af::Fetch> fetches{t->m.loss};
    for (auto& gr : t->grads) fetches.push_back(gr);
    auto out = sess->run(fetches, {{t->m.x, x}, {t->m.y, y}});
    REQUIRE_MESSAGE(out.ok(), out.status().to_string());
    for (const af::Tensor& o : *out) CHECK(o.device().type == af::DeviceType::CPU);  // fetches come back
    results.push_back(*out);
  }
  REQUIRE(results[0].size() == results[1].size());
  check_close(results[0][0], results[1][0], 1e-4, 1e-6, "loss");
  for (size_t i = 1; i < results[0].size(); ++i)
    check_close(results[0][i], results[1][i], 1e-3, 1e-5, "gradient of " + gpu.vars[i - 1].name());
}

TEST_CASE("needs a GPU: the Fashion-MNIST MLP trained on /gpu:0 reaches the CPU's test accuracy within 0.5 points") {
  require_gpu();
  const char* env = std::getenv("AF_FASHION_MNIST_DIR");
  const std::string dir = env ? env : kit::kFashionMnistDir;
  const bool real = fs::exists(dir + "/train-images-idx3-ubyte.gz");
  af::Result<kit::Split> data = af::Status::OK();
  if (real) {
    data = kit::load_fashion_mnist(dir, kit::Pixels::u8);
  } else {
    // A GPU machine without the Debian data set (gpu-check's): Fashion-MNIST-shaped data,
    // 10 classes of noisy pixel templates, learnable but not at once.
    MESSAGE("Fashion-MNIST is not in " << dir << " (AF_FASHION_MNIST_DIR): synthetic data of its shape");
    data = synthetic_fashion_mnist(12000, 2000);
  }
  REQUIRE_MESSAGE(data.ok(), data.status().to_string());
  auto train = [&](const std::string& device, const std::string& tag) {
    kit::Flags defaults = kit::sample_defaults("fashion_mnist");
    kit::Flags f = defaults;
    f.optimizer = "adam";
    f.learning_rate = 0.001;
    f.model_network = "256 128";
    f.epoch_number = 1;
    f.mode = "train_from_scratch";
    f.steps_to_validate = 1000000;
    const fs::path tmp = fs::temp_directory_path() / ("af_gpu_mlp_" + std::to_string(::getpid()) + "_" + tag);
    fs::remove_all(tmp);
    f.checkpoint_path = (tmp / "ckpt").string();
    f.output_path = (tmp / "tb").string();
    af::Graph g;
    std::unique_ptr<af::DeviceScope> scope;
    if (!device.empty()) scope = std::make_unique<af::DeviceScope>(g, device);
    g.set_seed(1);
    kit::Model m = kit::fashion_mnist_model(g, f);
    auto r = kit::train(g, m, *data, f);
    REQUIRE_MESSAGE(r.ok(), r.status().to_string());
    fs::remove_all(tmp);
    return *r;
  };
  const kit::TrainResult gpu = train("/gpu:0", "gpu");
  const kit::TrainResult cpu = train("", "cpu");
  MESSAGE("test accuracy: gpu " << gpu.test_accuracy << " (" << gpu.examples_per_second << " examples/s), cpu "
                                << cpu.test_accuracy << " (" << cpu.examples_per_second << " examples/s)");
  CHECK(cpu.test_accuracy > (real ? 0.8 : 0.5));
  CHECK(std::fabs(gpu.test_accuracy - cpu.test_accuracy) <= 0.005);
}
