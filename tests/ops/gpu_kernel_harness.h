// What the GPU kernel tests share: the skip when there is no GPU to run on, random
// inputs, and a node over placeholders of its inputs, so that a kernel runs directly
// (as a node actor would run it) on both devices.
#pragma once
#include <doctest/doctest.h>

#include <actorflow/actorflow.h>
#include <actorflow/ops/cuda_info.h>

#include <map>
#include <random>
#include <string>
#include <vector>

#include "interop/skip.h"

namespace aft {

// Ends the case as skipped (CTest) in a build without CUDA or on a machine without a
// device; AF_REQUIRE_GPU=1 makes that a failure.
inline void require_gpu() {
  if (!actorflow::built_with_cuda()) skip("GPU tests skipped: built without CUDA", "AF_REQUIRE_GPU");
  if (actorflow::cuda_device_count() == 0) skip("GPU tests skipped: no device", "AF_REQUIRE_GPU");
}

// A float32 tensor of `s`, uniform in [lo, hi), the same for the same seed.
inline actorflow::Tensor random_f32(actorflow::Shape s, uint32_t seed, float lo = -2.f, float hi = 2.f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(static_cast<size_t>(s.num_elements()));
  for (float& x : v) x = u(rng);
  return actorflow::Tensor::from_vector(v, std::move(s));
}

// A node of `op` over placeholders of the inputs' dtypes and shapes, in a graph the
// caller keeps.
inline const actorflow::Node& make_node(actorflow::Graph& g, const std::string& op,
                                        const std::vector<actorflow::Tensor>& inputs,
                                        std::map<std::string, actorflow::AttrValue> attrs = {}) {
  actorflow::NodeSpec spec;
  spec.op = op;
  spec.attrs = std::move(attrs);
  for (size_t i = 0; i < inputs.size(); ++i)
    spec.inputs.push_back(actorflow::placeholder(g, inputs[i].dtype(), inputs[i].shape(), "in" + std::to_string(i)));
  auto r = g.add_node(std::move(spec));
  REQUIRE_MESSAGE(r.ok(), r.status().to_string());
  return r->node();
}

}  // namespace aft
