// The CPU device as kernels see it: the pooling allocator and an Eigen thread pool for
// intra-op parallelism. Eigen stays out of this header; kernels reach the
// Eigen::ThreadPoolDevice through native_handle() (see ops/cpu/eigen_device.h).
#pragma once
#include <memory>

#include "actorflow/kernel.h"

namespace actorflow {

class CpuDevice final : public DeviceContext {
 public:
  // threads <= 0: the machine's cores.
  explicit CpuDevice(int threads = 0, int index = 0);
  ~CpuDevice() override;
  DeviceId id() const override { return {DeviceType::CPU, index_}; }
  Allocator* allocator() const override { return cpu_allocator(); }
  int num_threads() const override { return threads_; }
  void parallel_for(int64_t n, int64_t cost_per_unit,
                    const std::function<void(int64_t, int64_t)>& fn) const override;
  void* native_handle() const override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int threads_;
  int index_;
};

// A process-wide CPU device for code that runs kernels outside a session (tests, tools).
CpuDevice* default_cpu_device();

}  // namespace actorflow
