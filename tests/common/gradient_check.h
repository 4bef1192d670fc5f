// Symbolic gradients against central finite differences in f64.
#pragma once
#include <doctest/doctest.h>

#include <actorflow/actorflow.h>

#include <cmath>
#include <random>
#include <vector>

namespace aft {

namespace af = actorflow;

struct GradCheckOptions {
  double eps = 1e-6;
  uint32_t seed = 7;  // of the random weights r
  // Every evaluation in a session of its own. A stateful random op (Dropout) draws a new
  // mask on each run of a session; the first run of every fresh session draws the same
  // one, so the differences and the symbolic gradient all see one function.
  bool fresh_session_per_run = false;
};

// loss = sum(y * r) with a fixed random r, so every element of y's gradient matters.
// xs are f64 placeholders fed `values`; returns the largest error over all elements,
// relative where the derivative is large (|d| > 1e-3) and absolute otherwise.
inline double gradient_error(af::Graph& g, const af::Output& y, const std::vector<af::Output>& xs,
                             const std::vector<af::Tensor>& values, const GradCheckOptions& opts) {
  const double eps = opts.eps;
  REQUIRE(y.dtype() == af::f64);
  af::Output yy = y;
  af::Output weighted;
  {
    // r must match y's runtime shape; y may have unknown dims, so evaluate it once.
    auto probe = af::Session::create(g).value();
    af::FeedDict feeds;
    for (size_t i = 0; i < xs.size(); ++i) feeds.push_back({xs[i], values[i]});
    auto yv = probe.run({y}, feeds);
    REQUIRE_MESSAGE(yv.ok(), yv.status().to_string());
    af::Tensor r(af::f64, (*yv)[0].shape());
    std::mt19937 rng(opts.seed);
    std::uniform_real_distribution<double> u(0.5, 1.5);
    for (int64_t i = 0; i < r.num_elements(); ++i) r.data<double>()[i] = u(rng);
    weighted = af::reduce_sum(yy * af::constant(g, r, "grad_check_r"));
  }
  auto grads = af::gradients({weighted}, xs);
  auto sess = af::Session::create(g).value();
  af::FeedDict feeds;
  for (size_t i = 0; i < xs.size(); ++i) feeds.push_back({xs[i], values[i]});
  std::vector<af::Fetch> fetches;
  for (auto& gr : grads) {
    REQUIRE_MESSAGE(gr.valid(), "no gradient flows to an x");
    fetches.push_back(gr);
  }
  auto sym = sess.run(fetches, feeds);
  REQUIRE_MESSAGE(sym.ok(), sym.status().to_string());
  double worst = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const af::Tensor& s = (*sym)[i];
    REQUIRE(s.shape() == values[i].shape());
    for (int64_t k = 0; k < values[i].num_elements(); ++k) {
      auto eval_at = [&](double delta) {
        af::FeedDict f2;
        for (size_t j = 0; j < xs.size(); ++j) {
          af::Tensor v = values[j].clone();
          if (j == i) v.data<double>()[k] += delta;
          f2.push_back({xs[j], v});
        }
        auto l = opts.fresh_session_per_run ? af::Session::create(g).value().run({weighted}, f2) : sess.run({weighted}, f2);
        REQUIRE_MESSAGE(l.ok(), l.status().to_string());
        return (*l)[0].item<double>();
      };
      double numeric = (eval_at(eps) - eval_at(-eps)) / (2 * eps);
      double symbolic = s.data<double>()[k];
      double scale = std::max(std::fabs(numeric), std::fabs(symbolic));
      double err = scale > 1e-3 ? std::fabs(numeric - symbolic) / scale : std::fabs(numeric - symbolic);
      if (err > worst) worst = err;
    }
  }
  return worst;
}

inline double gradient_error(af::Graph& g, const af::Output& y, const std::vector<af::Output>& xs,
                             const std::vector<af::Tensor>& values, double eps = 1e-6, uint32_t seed = 7) {
  GradCheckOptions opts;
  opts.eps = eps;
  opts.seed = seed;
  return gradient_error(g, y, xs, values, opts);
}

// A random f64 tensor with values in [lo, hi].
inline af::Tensor random_f64(af::Shape shape, double lo = -1, double hi = 1, uint32_t seed = 1) {
  af::Tensor t(af::f64, shape);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  for (int64_t i = 0; i < t.num_elements(); ++i) t.data<double>()[i] = u(rng);
  return t;
}

}  // namespace aft
