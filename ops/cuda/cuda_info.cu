#include <cuda_runtime.h>

#include <vector>

#include "actorflow/status.h"

// The module's side of cuda_info.h (libactorflow forwards to these once it has loaded
// the module: ops/common/gpu_module.h).
namespace actorflow::gpu {

// gpu_device.cpp's (gpu_runtime.h is host code for g++): it also clears a non-sticky error.
Status cuda_status(cudaError_t e, const char* what);

namespace {

__global__ void axpb_kernel(float* out, const float* in, float a, float b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a * in[i] + b;
}

}  // namespace

int module_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky "no driver" error
    return 0;
  }
  return n;
}

std::string module_device_name(int index) {
  cudaDeviceProp p{};
  if (cudaGetDeviceProperties(&p, index) != cudaSuccess) {
    (void)cudaGetLastError();  // a bad index must not fail the next launch's check
    return "unknown";
  }
  return std::string(p.name) + " (sm_" + std::to_string(p.major) + std::to_string(p.minor) + ")";
}

Status module_self_test(int index) {
  // Refused before CUDA sees it: cudaSetDevice's "invalid device ordinal" would otherwise
  // linger as the thread's last error.
  const int count = module_device_count();
  if (index < 0 || index >= count)
    return Status(Code::invalid_argument,
                  "there is no GPU " + std::to_string(index) + " (this process sees " + std::to_string(count) + ")");
  AF_RETURN_IF_ERROR(cuda_status(cudaSetDevice(index), "cudaSetDevice"));
  const int n = 1 << 20;
  std::vector<float> host(n);
  for (int i = 0; i < n; ++i) host[i] = static_cast<float>(i % 1000);
  float *in = nullptr, *out = nullptr;
  AF_RETURN_IF_ERROR(cuda_status(cudaMalloc(&in, n * sizeof(float)), "cudaMalloc"));
  Status s = cuda_status(cudaMalloc(&out, n * sizeof(float)), "cudaMalloc");
  if (s.ok()) s = cuda_status(cudaMemcpy(in, host.data(), n * sizeof(float), cudaMemcpyHostToDevice), "copy to device");
  if (s.ok()) {
    axpb_kernel<<<(n + 255) / 256, 256>>>(out, in, 2.0f, 1.0f, n);
    s = cuda_status(cudaGetLastError(), "kernel launch");
  }
  if (s.ok()) s = cuda_status(cudaMemcpy(host.data(), out, n * sizeof(float), cudaMemcpyDeviceToHost), "copy to host");
  cudaFree(in);
  cudaFree(out);
  AF_RETURN_IF_ERROR(s);
  for (int i = 0; i < n; ++i)
    if (host[i] != 2.0f * static_cast<float>(i % 1000) + 1.0f)
      return Status(Code::internal, "GPU self-test computed a wrong value at element " + std::to_string(i));
  return Status::OK();
}

}  // namespace actorflow::gpu
