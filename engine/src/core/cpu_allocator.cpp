// A pooling CPU allocator. Blocks of at least kPoolMin bytes are rounded up to one of four
// size classes per power of two (at most 25% slack) and kept on per-class free lists when
// freed, so steady-state training reuses warm pages instead of faulting fresh ones.
#include <cstdlib>
#include <map>
#include <mutex>
#include <new>
#include <vector>

#include "actorflow/allocator.h"

namespace actorflow {
namespace {

constexpr size_t kPoolMin = 16 * 1024;
constexpr int64_t kMaxCachedBytes = int64_t{2} << 30;

size_t size_class(size_t bytes) {
  if (bytes < kPoolMin) return (bytes + kTensorAlignment - 1) / kTensorAlignment * kTensorAlignment;
  size_t p = 1;
  while (p * 2 <= bytes) p *= 2;
  size_t step = p / 4;
  return (bytes + step - 1) / step * step;
}

class PoolingCpuAllocator final : public Allocator {
 public:
  ~PoolingCpuAllocator() override { release_cached(); }
  const char* name() const override { return "cpu_pool"; }
  DeviceId device() const override { return {DeviceType::CPU, 0}; }

  void* allocate(size_t bytes) override {
    size_t cls = size_class(bytes == 0 ? 1 : bytes);
    {
      std::lock_guard<std::mutex> lock(mu_);
      stats_.num_allocs++;
      stats_.bytes_in_use += static_cast<int64_t>(cls);
      if (stats_.bytes_in_use > stats_.peak_bytes_in_use) stats_.peak_bytes_in_use = stats_.bytes_in_use;
      if (cls >= kPoolMin) {
        auto it = free_.find(cls);
        if (it != free_.end() && !it->second.empty()) {
          void* p = it->second.back();
          it->second.pop_back();
          stats_.bytes_cached -= static_cast<int64_t>(cls);
          stats_.num_pool_hits++;
          return p;
        }
      }
    }
    void* p = std::aligned_alloc(kTensorAlignment, cls);
    if (!p) {
      std::lock_guard<std::mutex> lock(mu_);
      stats_.bytes_in_use -= static_cast<int64_t>(cls);
    }
    return p;
  }

  void deallocate(void* ptr, size_t bytes) override {
    if (!ptr) return;
    size_t cls = size_class(bytes == 0 ? 1 : bytes);
    {
      std::lock_guard<std::mutex> lock(mu_);
      stats_.bytes_in_use -= static_cast<int64_t>(cls);
      if (cls >= kPoolMin && stats_.bytes_cached + static_cast<int64_t>(cls) <= kMaxCachedBytes) {
        free_[cls].push_back(ptr);
        stats_.bytes_cached += static_cast<int64_t>(cls);
        return;
      }
    }
    std::free(ptr);
  }

  AllocatorStats stats() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
  }

  void release_cached() override {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [cls, list] : free_)
      for (void* p : list) std::free(p);
    free_.clear();
    stats_.bytes_cached = 0;
  }

 private:
  mutable std::mutex mu_;
  std::map<size_t, std::vector<void*>> free_;
  AllocatorStats stats_;
};

}  // namespace

Allocator* cpu_allocator() {
  // Leaked on purpose: tensors in static objects may outlive any destruction order.
  static Allocator* a = new PoolingCpuAllocator();
  return a;
}

}  // namespace actorflow
