// The model of the linear_regression sample, shared with tests/engine/test_optimizers_train.cpp:
// y = 2x + 10 + noise, fitted one sample at a time with plain SGD, as the classic
// TF 1.x tutorial does (placeholders of shape {} and a feed per point).
#pragma once
#include <actorflow/actorflow.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <vector>

namespace linreg {

namespace af = actorflow;

struct Data {
  std::vector<float> x, y;
};

// n points, x uniform in [-1, 1], y = 2x + 10 + N(0, 0.1^2). The normal comes from
// Box-Muller over std::mt19937 (whose sequence the standard fixes), so every platform
// gets the same points for a seed.
inline Data make_data(int n = 100, uint32_t seed = 42) {
  std::mt19937 gen(seed);
  auto uniform = [&] { return (static_cast<double>(gen()) + 0.5) / 4294967296.0; };
  Data d;
  for (int i = 0; i < n; ++i) {
    double x = 2 * uniform() - 1;
    double noise = 0.1 * std::sqrt(-2 * std::log(uniform())) * std::cos(2 * M_PI * uniform());
    d.x.push_back(static_cast<float>(x));
    d.y.push_back(static_cast<float>(2 * x + 10 + noise));
  }
  return d;
}

struct Fit {
  double w = 0, b = 0;
  int epochs = 0;
};

// Trains y_pred = w * x + b on square(y - y_pred) with SGD(lr), one run per point;
// on_epoch(epoch, w, b) after each epoch. w and b start at 0.
inline af::Result<Fit> train(const Data& d, int epochs, double lr,
                             const std::function<void(int, double, double)>& on_epoch = {}) {
  af::Graph g;
  auto X = af::placeholder(g, af::f32, af::Shape{}, "X");
  auto Y = af::placeholder(g, af::f32, af::Shape{}, "Y");
  auto w = af::variable(g, af::zeros(g, {}), "w");
  auto b = af::variable(g, af::zeros(g, {}), "b");
  auto y_pred = X * w + b;
  auto loss = af::square(Y - y_pred, "loss");
  af::optim::SGD opt(lr);
  af::Operation train_op = opt.minimize(loss);

  AF_ASSIGN_OR_RETURN(af::Session sess, af::Session::create(g));
  AF_RETURN_IF_ERROR(sess.run_init());
  Fit fit;
  for (int epoch = 1; epoch <= epochs; ++epoch) {
    for (size_t i = 0; i < d.x.size(); ++i) {
      auto r = sess.run({}, {{X, af::Tensor::scalar(d.x[i])}, {Y, af::Tensor::scalar(d.y[i])}}, {train_op});
      if (!r.ok()) return r.status();
    }
    auto wb = sess.run({w, b});
    if (!wb.ok()) return wb.status();
    fit.w = (*wb)[0].item<float>();
    fit.b = (*wb)[1].item<float>();
    fit.epochs = epoch;
    if (on_epoch) on_epoch(epoch, fit.w, fit.b);
  }
  return fit;
}

}  // namespace linreg
