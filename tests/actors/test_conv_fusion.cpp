// The Conv2D -> BiasAdd (-> Relu) fusion pass and its _FusedConv2D kernel: fused and
// unfused steps give the same bits on random geometries, dtypes, with and without relu,
// on both kernel paths (oneDNN post-ops, and im2col + GEMM with a pass over each chunk);
// a small CNN trains to the same losses and weights with the pass on and off; a bias that
// does not fit is refused, at graph time and by the kernel.
#include <doctest/doctest.h>

#include <actorflow/actorflow.h>
#include <actorflow/layers.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "../../ops/cpu/onednn_conv.h"
#include "fusion_test_util.h"

namespace af = actorflow;
namespace cpu = actorflow::cpu;
using aft::OneActorPerNode;
using aft::random_tensor;
using aft::run_counted;

namespace {

af::SessionOptions fusing(bool on) {
  af::SessionOptions o;
  o.optimizer.fuse_conv_bias_relu = on;
  o.intra_op_threads = 2;
  return o;
}

struct ConvBackend {
  explicit ConvBackend(cpu::ConvBackend b) : saved(cpu::conv_backend()) { cpu::set_conv_backend(b); }
  ~ConvBackend() { cpu::set_conv_backend(saved); }
  cpu::ConvBackend saved;
};

bool same_bits(const af::Tensor& a, const af::Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() && std::memcmp(a.raw_data(), b.raw_data(), a.bytes()) == 0;
}

struct Geometry {
  int64_t n, h, w, c, kh, kw, o, s;
  const char* padding;
};

}  // namespace

TEST_CASE_FIXTURE(OneActorPerNode, "fused and unfused convolutions give the same bits: geometries, dtypes, relu, both paths") {
  std::mt19937 rng(5);
  // The CNN's two layers, 1x1, strided, VALID, channel counts off the vector width, one image.
  const std::vector<Geometry> geometries{{4, 28, 28, 1, 5, 5, 32, 1, "SAME"}, {4, 14, 14, 32, 5, 5, 64, 1, "SAME"},
                                         {2, 7, 7, 8, 1, 1, 24, 1, "VALID"},  {3, 9, 11, 3, 3, 3, 5, 2, "SAME"},
                                         {1, 8, 8, 17, 3, 2, 13, 1, "VALID"}, {2, 6, 5, 4, 2, 3, 7, 3, "SAME"}};
  for (auto backend : {cpu::ConvBackend::automatic, cpu::ConvBackend::eigen, cpu::ConvBackend::onednn}) {
    ConvBackend forced(backend);
    for (auto dtype : {af::f32, af::f64}) {
      for (const Geometry& q : geometries) {
        for (bool relu : {false, true}) {
          INFO("backend " << static_cast<int>(backend) << " " << std::string(af::dtype_name(dtype)) << " x=[" << q.n << "," << q.h
                          << "," << q.w << "," << q.c << "] filter " << q.kh << "x" << q.kw << "x" << q.o << " stride "
                          << q.s << " " << std::string(q.padding) << " relu=" << relu);
          af::Graph g;
          auto x = af::placeholder(g, dtype, {q.n, q.h, q.w, q.c}, "x");
          auto f = af::placeholder(g, dtype, {q.kh, q.kw, q.c, q.o}, "f");
          auto bias = af::placeholder(g, dtype, {q.o}, "bias");
          auto y = af::bias_add(af::conv2d(x, f, {q.s, q.s}, q.padding), bias);
          if (relu) y = af::relu(y);
          af::FeedDict feeds{{x, random_tensor(dtype, {q.n, q.h, q.w, q.c}, rng)},
                             {f, random_tensor(dtype, {q.kh, q.kw, q.c, q.o}, rng)},
                             {bias, random_tensor(dtype, {q.o}, rng)}};
          auto on = run_counted(g, fusing(true), {y}, feeds);
          auto off = run_counted(g, fusing(false), {y}, feeds);
          CHECK(on.actors == 1);  // the _FusedConv2D alone
          CHECK(off.actors == (relu ? 3 : 2));
          CHECK(same_bits(on.out[0], off.out[0]));
          if (relu) {
            double lowest = 0, highest = 0;
            for (int64_t i = 0; i < on.out[0].num_elements(); ++i) {
              lowest = std::min(lowest, on.out[0].element_as_double(i));
              highest = std::max(highest, on.out[0].element_as_double(i));
            }
            CHECK(lowest == 0);
            CHECK(highest > 0);
          }
        }
      }
    }
  }
}

TEST_CASE_FIXTURE(OneActorPerNode, "a small CNN's training steps: the same losses and weights with the pass on and off") {
  auto train = [](bool fuse) {
    af::Graph g;
    g.set_seed(7);
    auto x = af::placeholder(g, af::f32, {-1, 10, 10, 2}, "x");
    auto labels = af::placeholder(g, af::i64, {-1}, "labels");
    auto h = af::layers::conv2d(x, 6, {3, 3}, {1, 1}, "SAME", af::layers::Act::relu, "conv1");
    h = af::layers::max_pool2d(h, {2, 2}, {2, 2}, "SAME", "pool1");
    h = af::layers::conv2d(h, 8, {3, 3}, {1, 1}, "SAME", af::layers::Act::relu, "conv2");
    h = af::reshape(h, {-1, 5 * 5 * 8});
    auto logits = af::layers::dense(h, 3, {}, "out");
    auto loss = af::reduce_mean(af::sparse_softmax_cross_entropy(logits, labels));
    af::Operation step = af::optim::SGD(0.05).minimize(loss);
    // One batch, fitted step after step: its loss must fall.
    std::mt19937 rng(3);
    std::vector<int64_t> l(6);
    for (auto& v : l) v = static_cast<int64_t>(rng() % 3);
    af::FeedDict feeds{{x, random_tensor(af::f32, {6, 10, 10, 2}, rng)}, {labels, af::Tensor::from_vector(l, {6})}};
    return aft::train_counted(g, fusing(fuse), loss, step, 15, [&](int) { return feeds; },
                              {"conv1/kernel", "conv1/bias", "conv2/kernel", "conv2/bias", "out/kernel", "out/bias"});
  };
  const aft::Trained on = train(true), off = train(false);
  // Relu's gradient tests the BiasAdd output (> 0); the pass moves that test onto the
  // Relu's output, so each convolution fuses with its BiasAdd and Relu: 2 nodes fewer each.
  // conv1's Relu is max-pooled: its gradient's test and the pooling's gradient become one
  // node (pool_grad_fusion.h), 2 nodes fewer again.
  CHECK(on.first_step_actors == off.first_step_actors - 6);
  for (size_t s = 0; s < on.losses.size(); ++s) {
    CAPTURE(s);
    CHECK(on.losses[s] == off.losses[s]);
  }
  CHECK(on.losses.back() < on.losses.front());
  for (size_t i = 0; i < on.variables.size(); ++i) {
    CAPTURE(i);
    CHECK(same_bits(on.variables[i], off.variables[i]));
  }
}

TEST_CASE("_FusedConv2D: a bias that does not fit the output channels is refused at graph time and by the kernel") {
  af::Graph g;
  auto x = af::placeholder(g, af::f32, {1, 4, 4, 2}, "x");
  auto f = af::constant(g, af::Tensor(af::f32, {3, 3, 2, 5}), "f");
  auto fused = [&](const af::Output& bias, const std::string& name) {
    af::NodeSpec spec;
    spec.op = "_FusedConv2D";
    spec.name = name;
    spec.inputs = {x, f, bias};
    spec.attrs["padding"] = std::string("SAME");
    spec.attrs["relu"] = true;
    return g.add_node(std::move(spec));
  };
  auto good = fused(af::zeros(g, {5}), "good");
  REQUIRE(good.ok());
  CHECK(good->output(0).shape() == af::Shape{1, 4, 4, 5});
  CHECK_THROWS(af::gradients({af::reduce_sum(good->output(0))}, {x}));  // it has no gradient
  auto wrong = fused(af::zeros(g, {4}), "wrong");
  REQUIRE_FALSE(wrong.ok());
  CHECK(wrong.status().message().find("wrong") != std::string::npos);
  CHECK(wrong.status().message().find("5 output channels") != std::string::npos);
  // A bias whose size is known only when it runs reaches the kernel, which refuses it.
  auto unknown = af::placeholder(g, af::f32, {-1}, "bias");
  auto late = fused(unknown, "late");
  REQUIRE(late.ok());
  auto sess = af::Session::create(g).value();
  auto r = sess.run({late->output(0)}, {{x, af::Tensor(af::f32, {1, 4, 4, 2})}, {unknown, af::Tensor(af::f32, {3})}});
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message().find("late") != std::string::npos);
  CHECK(r.status().message().find("does not match the 5 output channels") != std::string::npos);
}
