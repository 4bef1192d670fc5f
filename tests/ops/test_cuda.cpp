// CUDA: the build links it when nvcc exists; the GPU check runs only where a GPU is, and
// is reported as skipped elsewhere (AF_REQUIRE_GPU=1 makes a missing GPU a failure).
#include <doctest/doctest.h>

#include <actorflow/ops/cuda_info.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>

#include "interop/skip.h"

namespace af = actorflow;

TEST_CASE("a GPU index past the last device is refused, with or without CUDA") {
  int n = af::cuda_device_count();
  REQUIRE(n >= 0);
  if (!af::built_with_cuda()) CHECK(n == 0);
  af::Status s = af::cuda_self_test(n);
  CHECK_FALSE(s.ok());
  CHECK_FALSE(s.message().empty());
}

// CUDA's libraries live in the CUDA module (libactorflow_cuda.so), loaded only where a GPU
// is: a process on a machine without one must not map them (~120 MB of cuBLASLt pages).
TEST_CASE("without a GPU no CUDA library is mapped; with one the CUDA module is loaded") {
  const int n = af::cuda_device_count();
  if (n > 0) {
    CHECK(af::cuda_module_loaded());
    return;
  }
  if (std::getenv("AF_GPU_MODULE")) return;  // a module named by path is loaded regardless
  // A driver's device node without a usable GPU (CUDA_VISIBLE_DEVICES=""): the module was
  // loaded to ask CUDA, which found none.
  for (const char* node : {"/dev/nvidiactl", "/dev/nvidia0", "/dev/dxg"})
    if (std::filesystem::exists(node)) return;
  CHECK_FALSE(af::cuda_module_loaded());
  std::ifstream maps("/proc/self/maps");
  std::string line;
  int lines = 0;
  while (std::getline(maps, line)) {
    ++lines;
    for (const char* lib : {"libcudart", "libcublas", "libactorflow_cuda"})
      CHECK_MESSAGE(line.find(lib) == std::string::npos, line);
  }
  CHECK(lines > 0);
}

TEST_CASE("needs a GPU: the CUDA self-test passes on every device") {
  int n = af::cuda_device_count();
  REQUIRE(n >= 0);
  if (!af::built_with_cuda()) aft::skip("GPU tests skipped: built without CUDA", "AF_REQUIRE_GPU");
  if (n == 0) aft::skip("GPU tests skipped: no device", "AF_REQUIRE_GPU");
  for (int i = 0; i < n; ++i) {
    std::cout << "GPU " << i << ": " << af::cuda_device_name(i) << "\n";
    af::Status s = af::cuda_self_test(i);
    CHECK_MESSAGE(s.ok(), s.to_string());
  }
}
