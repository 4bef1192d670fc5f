// Linear regression on whole batches: y = 5x + noise, placeholders of shape (-1, 1),
// loss = mean over the batch of sum(square(y - y_pred), axis 1), SGD with learning rate
// 0.001 for 50 steps. The loss goes to TensorBoard event files under logs/ (or the
// directory given with --logdir DIR): tensorboard --logdir logs
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include <actorflow/actorflow.h>
#include <actorflow/summary.h>

#include "kit/flags.h"

namespace af = actorflow;

int main(int argc, char** argv) {
  std::string logdir = "logs";
  // Only --logdir: a training flag of the other samples is refused, not ignored.
  kit::parse_simple_flags(argc, argv, "linear_regression_batch", {{"--logdir", &logdir, "TensorBoard event directory"}});
  auto start = std::chrono::steady_clock::now();

  // 100 points, x uniform in [0, 20], noise N(0, 1): Box-Muller over std::mt19937.
  const int n = 100;
  std::mt19937 gen(7);
  auto uniform = [&] { return (static_cast<double>(gen()) + 0.5) / 4294967296.0; };
  std::vector<float> xs, ys;
  for (int i = 0; i < n; ++i) {
    double x = 20 * uniform();
    double noise = std::sqrt(-2 * std::log(uniform())) * std::cos(2 * M_PI * uniform());
    xs.push_back(static_cast<float>(x));
    ys.push_back(static_cast<float>(5 * x + noise));
  }
  auto x_batch = af::Tensor::from_vector(xs, {n, 1});
  auto y_batch = af::Tensor::from_vector(ys, {n, 1});

  af::Graph g;
  auto X = af::placeholder(g, af::f32, {-1, 1}, "X");
  auto Y = af::placeholder(g, af::f32, {-1, 1}, "Y");
  auto w = af::variable(g, af::zeros(g, {1}), "w");
  auto y_pred = af::mul(X, w, "y_pred");
  auto loss = af::reduce_mean(af::reduce_sum(af::square(Y - y_pred), {1}), {}, false, "loss");
  auto step = af::train::global_step(g);
  af::optim::SGD opt(0.001);
  af::Operation train = opt.minimize(loss, {}, step);

  auto created = af::SummaryWriter::create(logdir);
  auto sess = af::Session::create(g);
  if (!created.ok() || !sess.ok()) {
    std::cerr << (created.ok() ? sess.status() : created.status()).to_string() << "\n";
    return 1;
  }
  af::SummaryWriter& writer = *created;
  if (auto s = writer.add_graph(g); !s.ok()) std::cerr << "graph summary: " << s.to_string() << "\n";
  if (auto s = sess->run_init(); !s.ok()) {
    std::cerr << s.to_string() << "\n";
    return 1;
  }
  const af::FeedDict feeds{{X, x_batch}, {Y, y_batch}};
  float last_loss = 0;
  for (int i = 0; i < 50; ++i) {
    // The loss is the one the update's gradient came from (before the update).
    auto r = sess->run({loss}, feeds, {train});
    if (!r.ok()) {
      std::cerr << r.status().to_string() << "\n";
      return 1;
    }
    last_loss = (*r)[0].item<float>();
    const int64_t s = i + 1;
    if (auto st = writer.add_scalar("loss", last_loss, s); !st.ok()) std::cerr << st.to_string() << "\n";
    if (i % 10 == 0 || i == 49) std::printf("step %2lld  loss %.4f\n", static_cast<long long>(s), last_loss);
  }
  auto final_w = sess->run({w, step});
  if (!final_w.ok()) {
    std::cerr << final_w.status().to_string() << "\n";
    return 1;
  }
  if (auto s = writer.close(); !s.ok()) std::cerr << s.to_string() << "\n";
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("events: %s\n", writer.path().c_str());
  std::printf("RESULT w=%.4f loss=%.4f steps=%lld seconds=%.3f\n", (*final_w)[0].to_vector<float>()[0], last_loss,
              static_cast<long long>((*final_w)[1].item<int64_t>()), seconds);
  return 0;
}
