// Runs a small graph on a node daemon: the same program as a local one, but the session's
// target is "af://host:port". Start a daemon first (see the README, "Across hosts"):
//
//   export ACTORFLOW_TOKEN=$(head -c 24 /dev/urandom | base64)
//   build/tools/actorflow-node --host 127.0.0.1 --port 2222 &
//   build/samples/remote_hello --target af://127.0.0.1:2222
#include <actorflow/actorflow.h>

#include <CLI/CLI.hpp>

#include <iostream>

namespace af = actorflow;

int main(int argc, char** argv) {
  CLI::App app{"remote_hello: y = relu(x W + b) computed on a node daemon"};
  std::string target = "af://127.0.0.1:2222";
  int64_t timeout_ms = 10000;
  app.add_option("--target", target, "the daemon, af://host:port (\"\" runs in this process)")->capture_default_str();
  app.add_option("--timeout_ms", timeout_ms, "fail a step that takes longer")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  af::Graph g;
  auto x = af::placeholder(g, af::f32, {-1, 3}, "x");
  auto w = af::variable(g, af::Tensor::from_vector<float>({1, -1, 0.5f, 2, 0, 1}, {3, 2}), "w");
  auto b = af::variable(g, af::Tensor::from_vector<float>({0.5f, -0.5f}), "b");
  auto y = af::relu(af::matmul(x, w) + b);
  auto total = af::reduce_sum(y);

  af::SessionOptions options;
  options.step_timeout_ms = timeout_ms;
  auto sess = af::Session::create(g, target, options);
  if (!sess.ok()) {
    std::cerr << sess.status().to_string() << "\n";
    return 1;
  }
  if (auto s = sess->run_init(); !s.ok()) {
    std::cerr << s.to_string() << "\n";
    return 1;
  }
  auto out = sess->run({y, total}, {{x, af::Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3})}});
  if (!out.ok()) {
    std::cerr << out.status().to_string() << "\n";
    return 1;
  }
  std::cout << "ran on " << (target.empty() ? std::string("this process") : target) << "\n";
  std::cout << "y = " << (*out)[0] << "\n";
  std::cout << "RESULT total=" << (*out)[1].item<float>() << "\n";
  return 0;
}
