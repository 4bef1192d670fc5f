#include "actorflow/ops/cpu_device.h"

#include <cstdlib>
#include <exception>
#include <mutex>
#include <thread>

#include "cpu/eigen_device.h"

namespace actorflow {

int cpu_thread_budget() {
  static const int n = [] {
    if (const char* v = std::getenv("AF_NUM_THREADS")) {
      int t = std::atoi(v);
      if (t > 0) return t;
    }
    int t = static_cast<int>(std::thread::hardware_concurrency());
    return t > 0 ? t : 1;
  }();
  return n;
}

namespace {

// One pool per process, shared by every session: sessions side by side must not each
// bring a pool of `cores` threads. Leaked: kernels of sessions closing at exit may use it.
Eigen::ThreadPool& process_pool() {
  static Eigen::ThreadPool* pool = new Eigen::ThreadPool(cpu_thread_budget());
  return *pool;
}

}  // namespace

struct CpuDevice::Impl {
  explicit Impl(int n) : device(&process_pool(), n) {}
  Eigen::ThreadPoolDevice device;
};

CpuDevice::CpuDevice(int threads, int index, Allocator* allocator)
    : allocator_(allocator ? allocator : cpu_allocator()), index_(index) {
  int pool = cpu_thread_budget();
  threads_ = threads <= 0 || threads > pool ? pool : threads;
  impl_ = std::make_unique<Impl>(threads_);
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
  // An exception escaping a pool thread would end the process; keep the first one and
  // rethrow it where the kernel can be blamed for it.
  std::mutex mu;
  std::exception_ptr first;
  Eigen::TensorOpCost cost(0, 0, static_cast<double>(cost_per_unit));
  impl_->device.parallelFor(n, cost, [&](Eigen::Index b, Eigen::Index e) {
    try {
      fn(b, e);
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu);
      if (!first) first = std::current_exception();
    }
  });
  if (first) std::rethrow_exception(first);
}

void* CpuDevice::native_handle() const { return &impl_->device; }

CpuDevice* default_cpu_device() {
  static CpuDevice* d = new CpuDevice(0);
  return d;
}

}  // namespace actorflow
