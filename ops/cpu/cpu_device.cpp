#include "actorflow/ops/cpu_device.h"
#include "actorflow/denormal.h"
#include "actorflow/environment.h"
#include "actorflow/library_threads.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>

#include "cpu/eigen_device.h"

namespace actorflow {

int cpu_thread_budget() {
  static const int n = [] {
    if (const char* v = environment_switch(EnvironmentSwitch::num_threads)) {
      int t = std::atoi(v);
      if (t > 0) return t;
    }
    int t = static_cast<int>(std::thread::hardware_concurrency());
    return t > 0 ? t : 1;
  }();
  return n;
}

namespace {

// Eigen's threads, each flushing denormals from its start and run as library_threads.h
// says: they run the kernels' blocks.
struct FlushingThreadEnvironment : Eigen::StlThreadEnvironment {
  EnvThread* CreateThread(std::function<void()> f) {
    return Eigen::StlThreadEnvironment::CreateThread([f = std::move(f)] {
      flush_denormals_on_this_thread();
      enter_library_thread("af-cpu");
      f();
    });
  }
};
using ProcessPool = Eigen::ThreadPoolTempl<FlushingThreadEnvironment>;

// One pool per process, shared by every session: sessions side by side must not each
// bring a pool of `cores` threads. Leaked: kernels of sessions closing at exit may use it.
ProcessPool& process_pool() {
  static ProcessPool* pool = new ProcessPool(cpu_thread_budget());
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

namespace {

// One parallel_for's work, shared with the pool threads that help. Kept alive by every
// helper's copy: a helper the pool runs late finds every block taken and returns without
// touching `fn`, which may be gone by then.
struct ParallelWork {
  const std::function<void(int64_t, int64_t)>* fn = nullptr;
  int64_t n = 0, blocks = 0;
  std::atomic<int64_t> next{0};
  std::atomic<int> active{0};  // helpers inside run(); the caller waits for none
  std::mutex mu;
  std::condition_variable cv;
  std::exception_ptr first;

  // Takes blocks until none is left. An exception escaping a pool thread would end the
  // process; the first is kept and rethrown where the kernel can be blamed for it.
  void run() {
    for (int64_t b; (b = next.fetch_add(1)) < blocks;) {
      try {
        (*fn)(b * n / blocks, (b + 1) * n / blocks);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu);
        if (!first) first = std::current_exception();
      }
    }
  }
};

}  // namespace

void CpuDevice::parallel_for(int64_t n, int64_t cost_per_unit,
                             const std::function<void(int64_t, int64_t)>& fn) const {
  if (n <= 0) return;
  // Waking a pool thread costs ~100 us here; below ~50 us of work, run inline.
  if (threads_ <= 1 || n * cost_per_unit < 50000) {
    fn(0, n);
    return;
  }
  // The calling thread takes blocks too, with threads_ - 1 pool threads beside it, rather
  // than waiting while the pool does all: a caller that waits hands its core to the pool
  // threads it wakes, and the kernel's scheduler may then stack them on that one core
  // (measured: a 64 MiB sum fell from 35-40 to 11-14 GB/s once the pool had slept). Four
  // blocks a thread, each of at least ~25 us, even out threads that start late.
  auto work = std::make_shared<ParallelWork>();
  work->fn = &fn;
  work->n = n;
  const int64_t per_block = std::max<int64_t>(1, 25000 / std::max<int64_t>(1, cost_per_unit));
  work->blocks = std::min<int64_t>(int64_t{4} * threads_, std::max<int64_t>(1, n / per_block));
  const int64_t helpers = std::min<int64_t>(threads_ - 1, work->blocks - 1);
  for (int64_t h = 0; h < helpers; ++h)
    impl_->device.enqueueNoNotification([work] {
      work->active.fetch_add(1);
      work->run();
      if (work->active.fetch_sub(1) == 1) {
        std::lock_guard<std::mutex> lock(work->mu);
        work->cv.notify_all();
      }
    });
  work->run();
  // Every block is taken; wait for the helpers still inside one. A helper that starts
  // after this finds none left.
  {
    std::unique_lock<std::mutex> lock(work->mu);
    work->cv.wait(lock, [&] { return work->active.load() == 0; });
  }
  if (work->first) std::rethrow_exception(work->first);
}

void* CpuDevice::native_handle() const { return &impl_->device; }

CpuDevice* default_cpu_device() {
  static CpuDevice* d = new CpuDevice(0);
  return d;
}

}  // namespace actorflow
