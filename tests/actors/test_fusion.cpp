// The MatMul -> BiasAdd (-> Relu) fusion pass and its _FusedMatMul kernel: fused and
// unfused steps agree on random shapes, transposes, dtypes, with and without relu, on
// both kernel paths (oneDNN post-ops and MatMul + one bias/relu pass); a small MLP
// trains to the same losses and weights with the pass on and off; fetches, feeds,
// targets and control edges on the chain's inner nodes keep what they need unfused.
#include <doctest/doctest.h>

#include <actorflow/actorflow.h>
#include <actorflow/layers.h>
#include <actorflow/runtime/actor_count.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <random>

#include "../../ops/cpu/onednn_matmul.h"
#include "fusion_test_util.h"

namespace af = actorflow;
namespace cpu = actorflow::cpu;
using aft::Counted;
using aft::OneActorPerNode;
using aft::random_tensor;
using aft::run_counted;

namespace {

af::SessionOptions fusing(bool on, int threads = 2) {
  af::SessionOptions o;
  o.optimizer.fuse_matmul_bias_relu = on;
  o.intra_op_threads = threads;
  return o;
}

// |a - b| <= tol * (1 + |b|) everywhere.
void check_near(const af::Tensor& a, const af::Tensor& b, double tol) {
  REQUIRE(a.dtype() == b.dtype());
  REQUIRE(a.shape() == b.shape());
  double worst = 0;
  for (int64_t i = 0; i < a.num_elements(); ++i) {
    double x = a.element_as_double(i), y = b.element_as_double(i);
    worst = std::max(worst, std::fabs(x - y) / (1 + std::fabs(y)));
  }
  CHECK(worst <= tol);
}

struct Backend {
  explicit Backend(cpu::MatmulBackend b) : saved(cpu::matmul_backend()) { cpu::set_matmul_backend(b); }
  ~Backend() { cpu::set_matmul_backend(saved); }
  cpu::MatmulBackend saved;
};

}  // namespace

TEST_CASE_FIXTURE(OneActorPerNode, "fused and unfused steps agree: random shapes, transposes, dtypes, relu, both kernel paths") {
  std::mt19937 rng(13);
  // (m, k, n): one row, small, around oneDNN's thresholds, and from 2^23 on (64x784x256,
  // 256^3: banded over 2 threads).
  const std::vector<std::array<int64_t, 3>> shapes{{1, 7, 5},     {3, 4, 2},      {64, 128, 10}, {17, 33, 65},
                                                   {64, 64, 64},  {64, 784, 256}, {5, 1, 9},     {256, 256, 256}};
  for (auto backend : {cpu::MatmulBackend::automatic, cpu::MatmulBackend::eigen, cpu::MatmulBackend::onednn}) {
    Backend forced(backend);
    for (auto dtype : {af::f32, af::f64}) {
      for (const auto& shape : shapes) {
        const int64_t m = shape[0], k = shape[1], n = shape[2];
        for (int flags = 0; flags < 8; ++flags) {
          const bool ta = flags & 1, tb = flags & 2, relu = flags & 4;
          INFO("backend " << static_cast<int>(backend) << " " << af::dtype_name(dtype) << " m=" << m << " k=" << k
                          << " n=" << n << " ta=" << ta << " tb=" << tb << " relu=" << relu);
          af::Graph g;
          af::Shape sa = ta ? af::Shape{k, m} : af::Shape{m, k};
          af::Shape sb = tb ? af::Shape{n, k} : af::Shape{k, n};
          auto a = af::placeholder(g, dtype, sa, "a");
          auto b = af::placeholder(g, dtype, sb, "b");
          auto bias = af::placeholder(g, dtype, {n}, "bias");
          auto y = af::bias_add(af::matmul(a, b, ta, tb), bias);
          if (relu) y = af::relu(y);
          af::FeedDict feeds{{a, random_tensor(dtype, sa, rng)},
                             {b, random_tensor(dtype, sb, rng)},
                             {bias, random_tensor(dtype, {n}, rng)}};
          auto on = run_counted(g, fusing(true), {y}, feeds);
          auto off = run_counted(g, fusing(false), {y}, feeds);
          CHECK(on.actors == 1);  // the _FusedMatMul alone
          CHECK(off.actors == (relu ? 3 : 2));
          check_near(on.out[0], off.out[0], dtype == af::f32 ? 1e-5 : 1e-12);
          if (relu) {
            double lowest = 0;
            for (int64_t i = 0; i < on.out[0].num_elements(); ++i) lowest = std::min(lowest, on.out[0].element_as_double(i));
            CHECK(lowest == 0);
          }
        }
      }
    }
  }
}

TEST_CASE_FIXTURE(OneActorPerNode, "a batched product (rank 3 against a matrix) fuses and takes MatMul's path") {
  std::mt19937 rng(7);
  af::Graph g;
  auto a = af::placeholder(g, af::f32, {3, 5, 8}, "a");
  auto b = af::placeholder(g, af::f32, {8, 6}, "b");
  auto bias = af::placeholder(g, af::f32, {6}, "bias");
  auto y = af::relu(af::bias_add(af::matmul(a, b), bias));
  af::FeedDict feeds{{a, random_tensor(af::f32, {3, 5, 8}, rng)},
                     {b, random_tensor(af::f32, {8, 6}, rng)},
                     {bias, random_tensor(af::f32, {6}, rng)}};
  auto on = run_counted(g, fusing(true), {y}, feeds);
  auto off = run_counted(g, fusing(false), {y}, feeds);
  CHECK(on.actors == 1);
  CHECK(on.out[0].shape() == af::Shape{3, 5, 6});
  check_near(on.out[0], off.out[0], 1e-5);
}

TEST_CASE_FIXTURE(OneActorPerNode, "fetching an inner tensor of the chain keeps that link unfused, with the right values") {
  std::mt19937 rng(3);
  af::Graph g;
  auto x = af::placeholder(g, af::f32, {4, 6}, "x");
  auto w = af::constant(g, random_tensor(af::f32, {6, 5}, rng), "w");
  auto bias = af::constant(g, random_tensor(af::f32, {5}, rng), "bias");
  auto mm = af::matmul(x, w);
  auto ba = af::bias_add(mm, bias);
  auto y = af::relu(ba);
  af::FeedDict feeds{{x, random_tensor(af::f32, {4, 6}, rng)}};
  auto ref = run_counted(g, fusing(false), {mm, ba, y}, feeds);
  CHECK(ref.actors == 3);

  // The MatMul output fetched: nothing fuses.
  auto a = run_counted(g, fusing(true), {mm, y}, feeds);
  CHECK(a.actors == 3);
  CHECK(a.out[0].equals(ref.out[0]));
  check_near(a.out[1], ref.out[2], 1e-6);
  // The BiasAdd output fetched: MatMul + BiasAdd fuse, the Relu stays.
  auto b = run_counted(g, fusing(true), {ba, y}, feeds);
  CHECK(b.actors == 2);
  check_near(b.out[0], ref.out[1], 1e-6);
  check_near(b.out[1], ref.out[2], 1e-6);
  // The Relu output alone: one node, under the Relu's name.
  auto c = run_counted(g, fusing(true), {y}, feeds);
  CHECK(c.actors == 1);
  check_near(c.out[0], ref.out[2], 1e-6);
  CHECK(y.node().name == "Relu");
  // The MatMul output fed: BiasAdd + Relu have no MatMul to fuse with.
  af::Tensor fed = random_tensor(af::f32, {4, 5}, rng);
  auto d = run_counted(g, fusing(true), {y}, {{mm, fed}});
  auto d_ref = run_counted(g, fusing(false), {y}, {{mm, fed}});
  CHECK(d.actors == 2);
  CHECK(d.out[0].equals(d_ref.out[0]));
  // The BiasAdd run as a target too: it must run as itself.
  auto e = run_counted(g, fusing(true), {y}, feeds, {af::Operation(ba)});
  CHECK(e.actors == 2);
  check_near(e.out[0], ref.out[2], 1e-6);
  // Switched off: nothing fuses.
  CHECK(run_counted(g, fusing(false), {y}, feeds).actors == 3);
}

TEST_CASE_FIXTURE(OneActorPerNode, "control edges: the fused node waits for the chain's control inputs; waiters move to it") {
  std::mt19937 rng(5);
  af::Graph g;
  auto x = af::placeholder(g, af::f32, {2, 3}, "x");
  auto w = af::constant(g, random_tensor(af::f32, {3, 4}, rng), "w");
  auto bias = af::constant(g, random_tensor(af::f32, {4}, rng), "bias");
  auto counter = af::variable(g, af::Tensor::scalar(0.0f), "counter", false);
  auto bump = af::assign_add(counter, af::constant(g, 1.0f));
  af::Output mm;
  {
    af::ControlDependencies deps(g, {af::Operation(bump)});
    mm = af::matmul(x, w);
  }
  auto y = af::relu(af::bias_add(mm, bias));
  af::Output after;
  {
    af::ControlDependencies deps(g, {af::Operation(mm)});
    after = af::identity(x, "after_matmul");
  }
  af::FeedDict feeds{{x, random_tensor(af::f32, {2, 3}, rng)}};
  auto off = run_counted(g, fusing(false), {y, after}, feeds);

  auto sess = af::Session::create(g, fusing(true)).value();
  REQUIRE(sess.run_init().ok());
  int64_t before = af::runtime::node_actors_spawned();
  auto r = sess.run({y, after}, feeds);
  REQUIRE_MESSAGE(r.ok(), r.status().to_string());
  // AssignAdd, Const, the fused node, Identity (MatMul, BiasAdd and Relu were 3).
  CHECK(af::runtime::node_actors_spawned() - before == off.actors - 2);
  check_near((*r)[0], off.out[0], 1e-6);
  CHECK((*r)[1].equals(off.out[1]));
  // The AssignAdd that MatMul waited for still ran, once per step.
  REQUIRE(sess.run({y}, feeds).ok());
  auto c = sess.run({af::read_variable(counter)});
  REQUIRE(c.ok());
  CHECK((*c)[0].item<float>() == 2.0f);
}

TEST_CASE_FIXTURE(OneActorPerNode, "a bias that waits for the MatMul (a control edge inside the chain) is not fused into a cycle") {
  std::mt19937 rng(9);
  af::Graph g;
  auto x = af::placeholder(g, af::f32, {2, 3}, "x");
  auto w = af::constant(g, random_tensor(af::f32, {3, 4}, rng), "w");
  auto b0 = af::placeholder(g, af::f32, {4}, "b0");
  auto mm = af::matmul(x, w);
  af::Output bias;
  {
    af::ControlDependencies deps(g, {af::Operation(mm)});
    bias = af::identity(b0, "bias_after_matmul");
  }
  auto y = af::relu(af::bias_add(mm, bias));
  af::FeedDict feeds{{x, random_tensor(af::f32, {2, 3}, rng)}, {b0, random_tensor(af::f32, {4}, rng)}};
  auto on = run_counted(g, fusing(true), {y}, feeds);
  auto off = run_counted(g, fusing(false), {y}, feeds);
  // MatMul cannot fuse (the bias waits for it); BiasAdd + Relu have no MatMul: all stay.
  CHECK(on.actors == off.actors);
  CHECK(on.out[0].equals(off.out[0]));
}

TEST_CASE_FIXTURE(OneActorPerNode, "a training step of a small MLP: same losses and weights with the pass on and off") {
  auto train = [](bool fuse) {
    af::Graph g;
    g.set_seed(42);
    auto x = af::placeholder(g, af::f32, {-1, 12}, "x");
    auto labels = af::placeholder(g, af::i64, {-1}, "labels");
    auto h = af::layers::dense(x, 16, af::layers::Act::relu, "h1");
    h = af::layers::dense(h, 8, af::layers::Act::relu, "h2");
    auto logits = af::layers::dense(h, 3, {}, "out");
    auto loss = af::reduce_mean(af::sparse_softmax_cross_entropy(logits, labels));
    af::optim::SGD opt(0.1);
    af::Operation step = opt.minimize(loss);
    std::mt19937 rng(11);
    auto feeds = [&](int) {
      std::vector<int64_t> l(8);
      for (auto& v : l) v = static_cast<int64_t>(rng() % 3);
      return af::FeedDict{{x, random_tensor(af::f32, {8, 12}, rng)}, {labels, af::Tensor::from_vector(l, {8})}};
    };
    return aft::train_counted(g, fusing(fuse), loss, step, 20, feeds,
                              {"h1/kernel", "h1/bias", "h2/kernel", "h2/bias", "out/kernel", "out/bias"});
  };
  const aft::Trained on = train(true), off = train(false);
  // Relu's gradient tests the BiasAdd output (> 0); the pass moves that test onto the
  // Relu's output, so the hidden layers fuse MatMul + BiasAdd + Relu (2 nodes fewer
  // each) and the output layer MatMul + BiasAdd (1 fewer).
  CHECK(on.first_step_actors == off.first_step_actors - 5);
  for (size_t s = 0; s < on.losses.size(); ++s) {
    CAPTURE(s);
    CHECK(on.losses[s] == doctest::Approx(off.losses[s]).epsilon(1e-5));
  }
  CHECK(on.losses.back() < on.losses.front());
  for (size_t i = 0; i < on.variables.size(); ++i) {
    CAPTURE(i);
    check_near(on.variables[i], off.variables[i], 1e-5);
  }
}

TEST_CASE_FIXTURE(OneActorPerNode, "x > 0 beside relu(x) reads relu(x) instead, so the chain fuses; any other reader stops it") {
  std::mt19937 rng(21);
  af::Graph g;
  auto x = af::placeholder(g, af::f32, {4, 6}, "x");
  auto w = af::constant(g, random_tensor(af::f32, {6, 5}, rng), "w");
  auto bias = af::placeholder(g, af::f32, {5}, "bias");
  auto zero = af::placeholder(g, af::f32, {}, "zero");
  auto ba = af::bias_add(af::matmul(x, w), bias);
  auto y = af::relu(ba);
  auto positive = ba > 0.0;
  auto other = ba > zero;       // not a constant: stays on the BiasAdd
  auto half = ba * 0.5;         // any other reader keeps the BiasAdd output
  af::Tensor xv = random_tensor(af::f32, {4, 6}, rng);
  // NaN, +-0 and signs in the BiasAdd output: the test must agree on all of them.
  xv.data<float>()[0] = std::nanf("");
  af::Tensor bv = af::Tensor::from_vector<float>({0.f, -0.f, 0.25f, -0.25f, 0.f}, {5});
  af::FeedDict feeds{{x, xv}, {bias, bv}, {zero, af::Tensor::scalar(0.0f)}};
  auto ref = run_counted(g, fusing(false), {y, positive}, feeds);
  auto on = run_counted(g, fusing(true), {y, positive}, feeds);
  CHECK(ref.actors == 4);
  CHECK(on.actors == 2);  // _FusedMatMul and the Greater on its output
  CHECK(on.out[1].equals(ref.out[1]));
  for (int64_t i = 0; i < ref.out[0].num_elements(); ++i) {
    const double a = on.out[0].element_as_double(i), b = ref.out[0].element_as_double(i);
    CHECK(((std::isnan(a) && std::isnan(b)) || std::fabs(a - b) <= 1e-6 * (1 + std::fabs(b))));
  }
  // A test against a fed value, or another reader: MatMul + BiasAdd fuse, the Relu stays.
  CHECK(run_counted(g, fusing(true), {y, positive, other}, feeds).actors == 4);
  CHECK(run_counted(g, fusing(true), {y, positive, half}, feeds).actors == 4);
}

TEST_CASE_FIXTURE(OneActorPerNode, "_FusedMatMul has no gradient: the pass runs after autodiff") {
  af::Graph g;
  auto a = af::placeholder(g, af::f32, {2, 3}, "a");
  auto w = af::variable(g, af::ones(g, {3, 2}), "w");
  auto b = af::variable(g, af::zeros(g, {2}), "b");
  af::NodeSpec spec;
  spec.op = "_FusedMatMul";
  spec.inputs = {a, w, b};
  spec.attrs["relu"] = true;
  auto op = g.add_node(std::move(spec));
  REQUIRE(op.ok());
  CHECK(op->output(0).shape() == af::Shape{2, 2});
  CHECK_THROWS(af::gradients({af::reduce_sum(op->output(0))}, {w}));
  // A bias that does not match the columns is refused at graph time.
  af::NodeSpec bad;
  bad.op = "_FusedMatMul";
  bad.inputs = {a, w, af::zeros(g, {3})};
  CHECK_FALSE(g.add_node(std::move(bad)).ok());
}
