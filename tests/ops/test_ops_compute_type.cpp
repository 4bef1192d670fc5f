// Mixed precision (ComputeTypeScope, graph.h): which nodes a scope marks, the gradients
// inheriting the mark, the bfloat16 convolutions against float32 ones, and a bad type.
#include <cmath>
#include <optional>
#include <random>

#include "../../ops/cpu/bf16_mirror.h"
#include "../../ops/cpu/onednn_matmul.h"
#include "test_util.h"

namespace af = actorflow;

namespace {

af::Tensor random_tensor(af::Shape shape, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> v(static_cast<size_t>(shape.num_elements()));
  for (auto& x : v) x = u(rng);
  return af::Tensor::from_vector(v, shape);
}

// ||a - b|| / ||b|| over all elements.
double relative_error(const af::Tensor& a, const af::Tensor& b) {
  REQUIRE(a.shape() == b.shape());
  double num = 0, den = 0;
  for (int64_t i = 0; i < a.num_elements(); ++i) {
    const double d = double(a.data<float>()[i]) - double(b.data<float>()[i]);
    num += d * d;
    den += double(b.data<float>()[i]) * double(b.data<float>()[i]);
  }
  return std::sqrt(num / den);
}

// y = conv2d(x, w) (stride 1) and the gradients of sum(y * r) with respect to x and w,
// under `type` ("" for no scope).
std::vector<af::Tensor> conv_and_gradients(const std::string& type, af::Shape xs, af::Shape ws,
                                           const std::string& padding = "SAME") {
  af::Graph g;
  const af::Tensor xv = random_tensor(xs, 1), wv = random_tensor(ws, 2);
  af::Output x = af::constant(g, xv), w = af::constant(g, wv);
  af::Output y;
  {
    std::optional<af::ComputeTypeScope> scope;
    if (!type.empty()) scope.emplace(g, type);
    y = af::conv2d(x, w, {1, 1}, padding);
  }
  // r shaped like y: y's shape is known once the graph has run, so take it from a run.
  const af::Tensor yv = aft::eval(g, {y})[0];
  af::Output r = af::constant(g, random_tensor(yv.shape(), 3));
  auto grads = af::gradients({af::reduce_sum(af::mul(y, r))}, {x, w});
  return aft::eval(g, {y, grads[0], grads[1]});
}

// The CNN's second convolution on 8 images, or `channels` input channels.
std::vector<af::Tensor> conv_and_gradients(const std::string& type, int64_t channels = 32) {
  return conv_and_gradients(type, {8, 14, 14, channels}, {5, 5, channels, 64});
}

}  // namespace

TEST_CASE("compute_type: a scope marks the ops that take a compute type, and Conv2D's gradients inherit it") {
  af::Graph g;
  af::Output x = af::placeholder(g, af::f32, {2, 8, 8, 3}, "x");
  af::Output w = af::constant(g, random_tensor({3, 3, 3, 4}, 4));
  af::Output y, z;
  {
    af::ComputeTypeScope scope(g, "bfloat16");
    y = af::conv2d(x, w, {1, 1}, "SAME");
    z = af::relu(y);
  }
  af::Output plain = af::conv2d(x, w, {1, 1}, "SAME");
  CHECK(y.node().attr_string("compute_type") == "bfloat16");
  CHECK_FALSE(z.node().has_attr("compute_type"));      // Relu takes none
  CHECK_FALSE(plain.node().has_attr("compute_type"));  // made outside the scope
  auto grads = af::gradients({af::reduce_sum(z)}, {x, w});
  CHECK(grads[0].node().op == "Conv2DBackpropInput");
  CHECK(grads[0].node().attr_string("compute_type") == "bfloat16");
  CHECK(grads[1].node().op == "Conv2DBackpropFilter");
  CHECK(grads[1].node().attr_string("compute_type") == "bfloat16");
}

TEST_CASE("compute_type: bfloat16 Conv2D and its gradients are within bfloat16's rounding of float32") {
  const auto f32 = conv_and_gradients("");
  const auto bf16 = conv_and_gradients("bfloat16");
  const auto f32_named = conv_and_gradients("float32");
  const char* what[] = {"y", "dx", "dw"};
  for (size_t i = 0; i < f32.size(); ++i) {
    INFO(what[i]);
    CHECK(f32_named[i].equals(f32[i]));  // float32 named is the default
    const double err = relative_error(bf16[i], f32[i]);
    if (actorflow::cpu::onednn_bf16_available()) {
      // Operands with 8 significant bits, sums of 800 products in float32.
      CHECK(err < 1e-2);
      CHECK(err > 1e-5);  // the bfloat16 kernels did run
    } else {
      MESSAGE("no AMX on this processor: the kernels compute in float32");
      CHECK(bf16[i].equals(f32[i]));
    }
  }
}

TEST_CASE("compute_type: bfloat16 filter gradients of uneven shapes and paddings are within its rounding") {
  // Stride 1 with AMX runs the filter gradient as a forward convolution (onednn_conv.cpp):
  // h != w, kh != kw, an even filter's uneven SAME padding, and VALID.
  struct Case {
    af::Shape x, w;
    const char* padding;
  };
  for (const Case& c : {Case{{4, 9, 13, 16}, {3, 4, 16, 24}, "SAME"}, Case{{3, 10, 7, 8}, {5, 2, 8, 16}, "VALID"},
                        Case{{2, 6, 6, 40}, {1, 1, 40, 8}, "SAME"}}) {
    INFO("x " << c.x.to_string() << " w " << c.w.to_string() << " " << c.padding);
    const auto f32 = conv_and_gradients("", c.x, c.w, c.padding);
    const auto bf16 = conv_and_gradients("bfloat16", c.x, c.w, c.padding);
    const double err = relative_error(bf16[2], f32[2]);
    if (actorflow::cpu::onednn_bf16_available()) {
      CHECK(err < 1e-2);
      CHECK(err > 1e-5);
    } else {
      CHECK(bf16[2].equals(f32[2]));
    }
  }
}

TEST_CASE("compute_type: with few input channels the filter gradient stays float32, the rest is bfloat16") {
  // There the float32 kernel is the faster one (onednn_conv.h).
  for (int64_t channels : {1, 3}) {
    INFO(channels << " input channels");
    const auto f32 = conv_and_gradients("", channels);
    const auto bf16 = conv_and_gradients("bfloat16", channels);
    CHECK(bf16[2].equals(f32[2]));
    if (actorflow::cpu::onednn_bf16_available()) CHECK(relative_error(bf16[0], f32[0]) > 1e-5);
    else CHECK(bf16[0].equals(f32[0]));
  }
}

TEST_CASE("compute_type: MatMul takes it too, its gradients inherit it, and bfloat16 is within its rounding") {
  af::Graph g;
  const af::Tensor av = random_tensor({64, 512}, 7), bv = random_tensor({512, 256}, 8), rv = random_tensor({64, 256}, 9);
  af::Output a = af::constant(g, av), b = af::constant(g, bv), r = af::constant(g, rv);
  af::Output y16, y32;
  {
    af::ComputeTypeScope scope(g, "bfloat16");
    y16 = af::matmul(a, b);
  }
  y32 = af::matmul(a, b);
  CHECK(y16.node().attr_string("compute_type") == "bfloat16");
  auto g16 = af::gradients({af::reduce_sum(af::mul(y16, r))}, {a, b});
  auto g32 = af::gradients({af::reduce_sum(af::mul(y32, r))}, {a, b});
  for (const af::Output& grad : g16) {
    CHECK(grad.node().op == "MatMul");
    CHECK(grad.node().attr_string("compute_type") == "bfloat16");
  }
  const auto out = aft::eval(g, {y16, y32, g16[0], g32[0], g16[1], g32[1]});
  for (size_t i = 0; i < out.size(); i += 2) {
    INFO("output " << i / 2);
    const double err = relative_error(out[i], out[i + 1]);
    if (actorflow::cpu::onednn_bf16_available()) {
      CHECK(err < 1e-2);
      CHECK(err > 1e-5);
    } else {
      CHECK(out[i].equals(out[i + 1]));
    }
  }
}

TEST_CASE("compute_type: a type the kernels do not know fails the node by name") {
  af::Graph g;
  af::NodeSpec spec;
  spec.op = "Conv2D";
  spec.name = "half_conv";
  spec.inputs = {af::constant(g, random_tensor({1, 4, 4, 2}, 5)), af::constant(g, random_tensor({2, 2, 2, 3}, 6))};
  spec.attrs = {{"padding", std::string("SAME")}, {"compute_type", std::string("float16")}};
  auto op = g.add_node(std::move(spec));
  REQUIRE(op.ok());
  auto sess = af::Session::create(g);
  REQUIRE(sess.ok());
  auto out = sess->run({af::Output(&g, op->node_id(), 0)});
  REQUIRE_FALSE(out.ok());
  CHECK(out.status().message().find("half_conv") != std::string::npos);
  CHECK(out.status().message().find("compute_type") != std::string::npos);
}

TEST_CASE("compute_type: a variable's bfloat16 copy serves its products until it is written, with the same bits") {
  // Weights of 1024x512 floats (above kMinMirroredFloats): MatMul reads the variable from
  // its kept bfloat16 mirror; a constant of the same values is converted per call.
  namespace cpu = actorflow::cpu;
  af::Graph g;
  const af::Tensor w0 = random_tensor({1024, 512}, 21), xv = random_tensor({64, 1024}, 22);
  const af::Tensor delta = random_tensor({1024, 512}, 23);
  af::Output x = af::constant(g, xv);
  af::Output w = af::variable(g, w0, "w");
  af::Output wc = af::placeholder(g, af::f32, {1024, 512}, "w_as_fed");
  af::Output y, yc, yt;
  {
    af::ComputeTypeScope scope(g, "bfloat16");
    y = af::matmul(x, w);
    yc = af::matmul(x, wc);
    // The input gradient's product reads W transposed: the same mirror.
    yt = af::matmul(y, w, false, true);
  }
  af::Output add = af::assign_add(w, af::constant(g, delta));
  af::optim::GradientDescent sgd(0.5);
  af::Operation train = sgd.minimize(af::reduce_mean(af::square(y)));
  auto sess = af::Session::create(g);
  REQUIRE_MESSAGE(sess.ok(), sess.status().to_string());
  REQUIRE(sess->run_init().ok());

  auto check_against_fed = [&](const char* when) {
    INFO(when);
    auto wv = sess->run({w});
    REQUIRE(wv.ok());
    auto out = sess->run({y, yc, yt}, {{wc, (*wv)[0].clone()}});
    REQUIRE_MESSAGE(out.ok(), out.status().to_string());
    CHECK((*out)[0].equals((*out)[1]));  // the same bits as converting per call
    return (*out)[2];
  };
  const uint64_t before = cpu::bf16_mirror_conversions();
  check_against_fed("as initialized");
  const uint64_t first = cpu::bf16_mirror_conversions();
  if (!cpu::onednn_bf16_available()) {
    MESSAGE("no AMX on this processor: float32 products, no mirrors");
    CHECK(first == before);
    return;
  }
  CHECK(first == before + 1);  // one conversion for both products of W
  check_against_fed("again, unchanged");
  CHECK(cpu::bf16_mirror_conversions() == first);  // kept
  REQUIRE(sess->run({}, {}, {af::Operation(add)}).ok());
  check_against_fed("after AssignAdd");
  CHECK(cpu::bf16_mirror_conversions() == first + 1);  // the write made it stale
  REQUIRE(sess->run({}, {}, {train}).ok());
  check_against_fed("after an optimizer's step");
  CHECK(cpu::bf16_mirror_conversions() == first + 2);
  CHECK(cpu::bf16_mirrors_kept() >= 1);
}
