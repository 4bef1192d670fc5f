// Autodiff machinery: graph extension, accumulation, broadcasting, stop_gradient,
// integer inputs, sparse gather gradients; plus the binary-op gradient checks.
#include <doctest/doctest.h>

#include "gradient_check.h"
#include "test_util.h"

namespace af = actorflow;

TEST_CASE("gradient nodes are added under a gradients/ scope") {
  af::Graph g;
  auto x = af::placeholder(g, af::f64, {3}, "x");
  auto y = af::reduce_sum(x * x);
  int before = g.num_nodes();
  auto dx = af::gradients({y}, {x});
  REQUIRE(dx.size() == 1);
  REQUIRE(dx[0].valid());
  CHECK(g.num_nodes() > before);
  CHECK(dx[0].node().name.rfind("gradients/", 0) == 0);
  auto v = aft::eval1(g, dx[0], {{x, af::Tensor::from_vector<double>({1, 2, 3})}});
  aft::check_close(v, {2, 4, 6});
}

TEST_CASE("a sum of two paths accumulates; an unrelated x gets nothing") {
  af::Graph g;
  auto x = af::placeholder(g, af::f64, {}, "x");
  auto other = af::placeholder(g, af::f64, {}, "other");
  auto y = x * 3.0 + x * x;  // dy/dx = 3 + 2x
  auto d = af::gradients({y}, {x, other});
  REQUIRE(d[0].valid());
  CHECK_FALSE(d[1].valid());
  auto v = aft::eval1(g, d[0], {{x, af::Tensor::scalar(2.0)}});
  CHECK(v.item<double>() == doctest::Approx(7.0));
}

TEST_CASE("broadcasting is reduced: bias [3] added to [?,3]") {
  af::Graph g;
  auto x = af::placeholder(g, af::f64, {-1, 3}, "x");
  auto b = af::placeholder(g, af::f64, {3}, "b");
  auto y = af::reduce_sum((x + b) * 2.0);
  auto d = af::gradients({y}, {b, x});
  auto xv = af::Tensor::from_vector<double>({1, 2, 3, 4, 5, 6}, {2, 3});
  auto out = aft::eval(g, {d[0], d[1]}, {{x, xv}, {b, af::Tensor::from_vector<double>({0, 0, 0})}});
  CHECK(out[0].shape() == af::Shape{3});
  aft::check_close(out[0], {4, 4, 4});
  aft::check_close(out[1], {2, 2, 2, 2, 2, 2});
}

TEST_CASE("stop_gradient blocks; integer paths carry no gradient") {
  af::Graph g;
  auto x = af::placeholder(g, af::f64, {}, "x");
  auto y = x * af::stop_gradient(x * 5.0);  // d/dx = stop(5x) = 5x
  auto d = af::gradients({y}, {x});
  auto v = aft::eval1(g, d[0], {{x, af::Tensor::scalar(2.0)}});
  CHECK(v.item<double>() == doctest::Approx(10.0));
}

TEST_CASE("gradient check: binary ops with broadcasting") {
  af::Graph g;
  auto a = af::placeholder(g, af::f64, {2, 3}, "a");
  auto b = af::placeholder(g, af::f64, {3}, "b");
  auto av = aft::random_f64({2, 3}, 0.5, 2, 1);
  auto bv = aft::random_f64({3}, 0.5, 2, 2);
  CHECK(aft::gradient_error(g, a + b, {a, b}, {av, bv}) <= 1e-6);
  CHECK(aft::gradient_error(g, a - b, {a, b}, {av, bv}) <= 1e-6);
  CHECK(aft::gradient_error(g, a * b, {a, b}, {av, bv}) <= 1e-6);
  CHECK(aft::gradient_error(g, a / b, {a, b}, {av, bv}) <= 1e-6);
  CHECK(aft::gradient_error(g, af::add_n({a, a, a}), {a}, {av}) <= 1e-6);
}

TEST_CASE("second order: gradients of gradients through reductions and broadcasting") {
  af::Graph g;
  auto x = af::placeholder(g, af::f64, {2, 3}, "x");
  auto b = af::placeholder(g, af::f64, {3}, "b");
  // d/dx of sum(x^3 + b*x) is 3x^2 + b; its sum's gradient is 6x (and 2 per row for b).
  auto y = af::reduce_mean(x * x * x + b * x) * 6.0;
  auto dx = af::gradients({y}, {x})[0];
  auto d2 = af::gradients({af::reduce_sum(dx)}, {x, b});
  auto xv = af::Tensor::from_vector<double>({1, 2, 3, -1, -2, 0.5}, {2, 3});
  auto out = aft::eval(g, {d2[0], d2[1]}, {{x, xv}, {b, af::Tensor::from_vector<double>({1, 1, 1})}});
  aft::check_close(out[0], {6, 12, 18, -6, -12, 3});
  aft::check_close(out[1], {2, 2, 2});
}

TEST_CASE("second order through SumToShapeOf (unknown batch dim) matches finite differences") {
  af::Graph g;
  auto x = af::placeholder(g, af::f64, {-1, 3}, "x");
  auto b = af::placeholder(g, af::f64, {3}, "b");
  auto db = af::gradients({af::reduce_sum(af::square(x + b) * x)}, {b})[0];
  CHECK(db.node().op == "SumToShapeOf");
  auto xv = aft::random_f64({2, 3}, 0.5, 1.5, 11);
  auto bv = aft::random_f64({3}, 0.5, 1.5, 12);
  CHECK(aft::gradient_error(g, db, {x, b}, {xv, bv}) <= 1e-6);
}
