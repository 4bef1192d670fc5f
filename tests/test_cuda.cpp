// CUDA: the build links it when nvcc exists; the GPU check runs only where a GPU is.
#include <doctest/doctest.h>

#include <actorflow/ops/cuda_info.h>

#include <iostream>

namespace af = actorflow;

TEST_CASE("GPU self-test (skipped without a GPU)") {
  int n = af::cuda_device_count();
  CHECK(n >= 0);
  if (!af::built_with_cuda()) {
    CHECK(n == 0);
    CHECK_FALSE(af::cuda_self_test(0).ok());
    MESSAGE("built without CUDA: GPU checks skipped");
    return;
  }
  if (n == 0) {
    MESSAGE("no GPU on this machine: GPU checks skipped");
    return;
  }
  for (int i = 0; i < n; ++i) {
    std::cout << "GPU " << i << ": " << af::cuda_device_name(i) << "\n";
    af::Status s = af::cuda_self_test(i);
    CHECK_MESSAGE(s.ok(), s.to_string());
  }
}
