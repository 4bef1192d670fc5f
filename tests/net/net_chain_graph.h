// A step slow enough to be interrupted mid-way: a chain of 512x512 matmuls whose sum is
// fetched. Cut over two daemons by default, the chain on /job:worker/task:1 and the sum
// on /job:worker/task:0, which waits for it (an edge with no other way to arrive); with
// both devices "" the whole step runs on one daemon. For the net tests that interrupt a
// step (kill, stop, deadline, SIGTERM) and for tests/net_client_child.cpp, the client they
// kill; no test framework here.
#pragma once
#include <actorflow/actorflow.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>

namespace aftnet {

struct ChainStep {
  std::unique_ptr<actorflow::Graph> graph;  // the session's graph: it outlives the session
  std::optional<actorflow::Session> session;
  actorflow::Output x, sum;
  int depth = 0;
  static actorflow::Tensor input() { return actorflow::Tensor::filled(actorflow::f32, {512, 512}, 0.5); }
  // Every element of the chain stays 0.5 (no denormals), so the sum is 0.5 * 512 * 512.
  static constexpr float kSum = 131072.0f;
  actorflow::Result<std::vector<actorflow::Tensor>> run(const actorflow::RunOptions& options = {}) {
    return session->run(options, {sum}, {{x, input()}});
  }
};

// A session on `target` whose step has just taken `at_least`: the chain doubles from 32
// matmuls until one step is that slow. The chain runs on `far`, the sum on `near`.
inline actorflow::Result<ChainStep> chain_step(const std::string& target, const actorflow::SessionOptions& opts,
                                               std::chrono::milliseconds at_least,
                                               const std::string& far = "/job:worker/task:1",
                                               const std::string& near = "/job:worker/task:0") {
  namespace af = actorflow;
  ChainStep c;
  for (int depth = 32; depth <= (1 << 14); depth *= 2) {
    c.session.reset();
    c.graph = std::make_unique<af::Graph>();
    c.depth = depth;
    af::Output y;
    {
      std::optional<af::DeviceScope> on;
      if (!far.empty()) on.emplace(*c.graph, far);
      c.x = af::placeholder(*c.graph, af::f32, {512, 512}, "x");
      y = c.x;
      for (int i = 0; i < depth; ++i) y = af::matmul(y, c.x) * (1.0 / 256);
    }
    {
      std::optional<af::DeviceScope> on;
      if (!near.empty()) on.emplace(*c.graph, near);
      c.sum = af::reduce_sum(y, {}, false, "waits_for_the_chain");
    }
    AF_ASSIGN_OR_RETURN(af::Session s, af::Session::create(*c.graph, target, opts));
    c.session.emplace(std::move(s));
    auto t0 = std::chrono::steady_clock::now();
    AF_RETURN_IF_ERROR(c.run().status());
    if (std::chrono::steady_clock::now() - t0 >= at_least) return c;
  }
  return af::deadline_exceeded("no chain of up to 16384 matmuls took " + std::to_string(at_least.count()) + " ms");
}

}  // namespace aftnet
