#include "torch_peers.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <vector>

namespace peers {

double torch_scalar_chain_us_per_add(int n, int reps) {
  torch::NoGradGuard no_grad;
  auto one = torch::ones({}, torch::kFloat32);
  std::vector<double> times;
  for (int r = 0; r < reps; ++r) {
    auto y = torch::zeros({}, torch::kFloat32);
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < n; ++i) y = y + one;
    auto t1 = std::chrono::steady_clock::now();
    if (y.item<float>() != static_cast<float>(n)) return -1;
    times.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count() / n);
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

}  // namespace peers
