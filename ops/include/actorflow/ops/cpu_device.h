// The CPU device as kernels see it: an allocator and a share of the process's one intra-op
// thread pool. Eigen stays out of this header; kernels reach the Eigen::ThreadPoolDevice
// through native_handle() (see ops/cpu/eigen_device.h).
#pragma once
#include "actorflow/api.h"
#include <memory>

#include "actorflow/kernel.h"

AF_PUBLIC_BEGIN

namespace actorflow {

// How many threads the process gives to compute: $AF_NUM_THREADS, else the machine's
// cores. The intra-op pool has this many threads and so has the actor scheduler; a
// kernel that shards over the pool works on its scheduler thread beside num_threads() - 1
// pool threads, so the two together keep about this many threads busy, not twice as many.
int cpu_thread_budget();

class CpuDevice final : public DeviceContext {
 public:
  // threads <= 0: the whole pool; otherwise at most `threads` shards run at once.
  // allocator null: the process-wide pooling allocator.
  explicit CpuDevice(int threads = 0, int index = 0, Allocator* allocator = nullptr);
  ~CpuDevice() override;
  DeviceId id() const override { return {DeviceType::CPU, index_}; }
  Allocator* allocator() const override { return allocator_; }
  int num_threads() const override { return threads_; }
  // Runs fn over [0, n) in blocks, taken by the calling thread and by up to
  // num_threads() - 1 pool threads. An exception thrown by `fn` is rethrown here, on the
  // caller's thread, after every block has finished.
  void parallel_for(int64_t n, int64_t cost_per_unit,
                    const std::function<void(int64_t, int64_t)>& fn) const override;
  void* native_handle() const override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  Allocator* allocator_;
  int threads_;
  int index_;
};

// A process-wide CPU device for code that runs kernels outside a session (tests, tools).
CpuDevice* default_cpu_device();

}  // namespace actorflow

AF_PUBLIC_END
