#include "actorflow/ops/cpu_device.h"

#include <thread>

#include "cpu/eigen_device.h"

namespace actorflow {

struct CpuDevice::Impl {
  explicit Impl(int n) : pool(n), device(&pool, n) {}
  Eigen::ThreadPool pool;
  Eigen::ThreadPoolDevice device;
};

CpuDevice::CpuDevice(int threads, int index) : index_(index) {
  if (threads <= 0) threads = static_cast<int>(std::thread::hardware_concurrency());
  if (threads <= 0) threads = 1;
  threads_ = threads;
  impl_ = std::make_unique<Impl>(threads);
}

CpuDevice::~CpuDevice() = default;

void CpuDevice::parallel_for(int64_t n, int64_t cost_per_unit,
                             const std::function<void(int64_t, int64_t)>& fn) const {
  if (n <= 0) return;
  // Waking a pool thread costs ~100 us here; below ~50 us of work, run inline.
  if (threads_ <= 1 || n * cost_per_unit < 50000) {
    fn(0, n);
    return;
  }
  Eigen::TensorOpCost cost(0, 0, static_cast<double>(cost_per_unit));
  impl_->device.parallelFor(n, cost, [&fn](Eigen::Index b, Eigen::Index e) { fn(b, e); });
}

void* CpuDevice::native_handle() const { return &impl_->device; }

CpuDevice* default_cpu_device() {
  static CpuDevice* d = new CpuDevice(0);
  return d;
}

}  // namespace actorflow
