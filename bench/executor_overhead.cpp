// Runtime overhead: a 1,000-node chain of scalar adds (microseconds per node firing),
// the round trip of a one-node graph, and pipelining of two independent heavy branches.
#include <actorflow/actorflow.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

#ifdef AF_HAVE_TORCH
#include "peers/torch_peers.h"
#endif

namespace af = actorflow;
using Clock = std::chrono::steady_clock;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double us_since(Clock::time_point t0) { return std::chrono::duration<double, std::micro>(Clock::now() - t0).count(); }

double chain_us_per_node(int n, int steps) {
  af::Graph g;
  auto x = af::placeholder(g, af::f32, {}, "x");
  auto one = af::constant(g, 1.0f, "one");
  af::Output y = x;
  for (int i = 0; i < n; ++i) y = y + one;
  af::Session sess(g);
  af::Tensor in = af::Tensor::scalar(0.0f);
  for (int i = 0; i < 3; ++i) (void)sess.run({y}, {{x, in}});  // prepare + warm up
  std::vector<double> t;
  for (int s = 0; s < steps; ++s) {
    auto t0 = Clock::now();
    auto out = sess.run({y}, {{x, in}});
    t.push_back(us_since(t0) / n);
    if (!out.ok() || (*out)[0].item<float>() != static_cast<float>(n)) {
      std::fprintf(stderr, "chain: wrong result\n");
      return -1;
    }
  }
  return median(t);
}

double one_node_latency_us(int steps) {
  af::Graph g;
  auto x = af::placeholder(g, af::f32, {}, "x");
  auto y = af::identity(x);
  af::Session sess(g);
  af::Tensor in = af::Tensor::scalar(1.0f);
  for (int i = 0; i < 100; ++i) (void)sess.run({y}, {{x, in}});
  std::vector<double> t;
  for (int s = 0; s < steps; ++s) {
    auto t0 = Clock::now();
    auto out = sess.run({y}, {{x, in}});
    t.push_back(us_since(t0));
    if (!out.ok()) return -1;
  }
  return median(t);
}

// Two independent branches of single-threaded heavy work (chains of 256x256 matmuls,
// 1 intra-op thread): fetched together (the actors overlap them on the two cores)
// versus one after another.
std::pair<double, double> pipelining_ms(int reps) {
  af::Graph g;
  const int64_t n = 256;
  auto x = af::placeholder(g, af::f32, {n, n}, "x");
  auto w = af::constant(g, af::Tensor::filled(af::f32, {n, n}, 1.0 / n), "w");
  auto branch = [&](const char* name) {
    af::NameScope s(g, name);
    af::Output y = x;
    for (int i = 0; i < 8; ++i) y = af::matmul(y, w);
    return y;
  };
  auto a = branch("a");
  auto b = branch("b");
  af::SessionOptions opts;
  opts.intra_op_threads = 1;
  af::Session sess(g, opts);
  af::Tensor in = af::Tensor::filled(af::f32, {n, n}, 1.0);
  for (int i = 0; i < 3; ++i) {
    (void)sess.run({a, b}, {{x, in}});
    (void)sess.run({a}, {{x, in}});
    (void)sess.run({b}, {{x, in}});
  }
  std::vector<double> together, apart;
  for (int r = 0; r < reps; ++r) {
    auto t0 = Clock::now();
    (void)sess.run({a, b}, {{x, in}});
    together.push_back(us_since(t0) / 1000);
    t0 = Clock::now();
    (void)sess.run({a}, {{x, in}});
    (void)sess.run({b}, {{x, in}});
    apart.push_back(us_since(t0) / 1000);
  }
  return {median(together), median(apart)};
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  int steps = quick ? 30 : 200;
  double ours = chain_us_per_node(1000, steps);
  double peer = -1;
#ifdef AF_HAVE_TORCH
  peer = peers::torch_scalar_chain_us_per_add(1000, steps);
#endif
  if (peer > 0)
    std::printf("BENCH executor_overhead ours=%.3fus peer=%.3fus ratio=%.2f (libtorch)\n", ours, peer, ours / peer);
  else
    std::printf("BENCH executor_overhead ours=%.3fus peer=n/a ratio=n/a (libtorch not installed)\n", ours);
  double lat = one_node_latency_us(quick ? 1000 : 10000);
  std::printf("BENCH step_latency ours=%.1fus target=20us\n", lat);
  auto [together, apart] = pipelining_ms(quick ? 5 : 20);
  std::printf("BENCH pipelining together=%.2fms apart=%.2fms speedup=%.2fx target=1.7x\n", together, apart, apart / together);
  return 0;
}
