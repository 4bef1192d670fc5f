// Helpers shared by the tests: evaluate outputs of a graph and compare tensors.
#pragma once
#include <doctest/doctest.h>

#include <actorflow/actorflow.h>
#include <actorflow/op_registry.h>

#include <cmath>
#include <string>
#include <vector>

namespace aft {

namespace af = actorflow;

// Runs the fetches in a fresh session of the default backend (the actor runtime when
// linked) and fails the test on error.
inline std::vector<af::Tensor> eval(af::Graph& g, const std::vector<af::Output>& fetches, const af::FeedDict& feeds = {},
                                    af::SessionOptions opts = {}) {
  auto sess = af::Session::create(g, opts).value();
  REQUIRE(sess.run_init().ok());
  std::vector<af::Fetch> f(fetches.begin(), fetches.end());
  auto r = sess.run(f, feeds);
  if (!r.ok()) FAIL(r.status().to_string());
  return *r;
}

inline af::Tensor eval1(af::Graph& g, const af::Output& fetch, const af::FeedDict& feeds = {}) {
  return eval(g, {fetch}, feeds)[0];
}

// The status of running `fetch`, for error tests.
inline af::Status eval_status(af::Graph& g, const af::Output& fetch, const af::FeedDict& feeds = {}) {
  auto sess = af::Session::create(g).value();
  return sess.run({fetch}, feeds).status();
}

// Element-by-element closeness of a float tensor to expected values.
inline void check_close(const af::Tensor& t, const std::vector<double>& expected, double tol = 1e-5) {
  REQUIRE(t.num_elements() == static_cast<int64_t>(expected.size()));
  for (size_t i = 0; i < expected.size(); ++i) {
    double v = t.element_as_double(static_cast<int64_t>(i));
    if (std::isnan(expected[i])) {
      CHECK(std::isnan(v));
    } else if (std::isinf(expected[i])) {
      CHECK(v == expected[i]);
    } else {
      INFO("element " << i << ": got " << v << ", expected " << expected[i]);
      CHECK(std::fabs(v - expected[i]) <= tol * (1 + std::fabs(expected[i])));
    }
  }
}

// The shape function of a test op whose one output is shaped as its first input.
inline af::Status same_shape(af::ShapeContext& c) {
  c.set_output(0, c.input_dtype(0), c.input_shape(0));
  return af::Status::OK();
}

// A node of a one-input test op (registered by the test) on `x`.
inline af::Output unary(af::Graph& g, const std::string& op, const af::Output& x, const std::string& name) {
  af::NodeSpec spec;
  spec.op = op;
  spec.name = name;
  spec.inputs = {x};
  return g.add_node(spec)->output(0);
}

}  // namespace aft
