// A budget in front of another allocator: counts this user's bytes, refuses past the limit.
#include <mutex>

#include "actorflow/allocator.h"

namespace actorflow {
namespace {

class LimitedAllocator final : public Allocator {
 public:
  LimitedAllocator(Allocator* base, int64_t limit) : base_(base), limit_(limit) {}
  const char* name() const override { return "limited"; }
  DeviceId device() const override { return base_->device(); }

  void* allocate(size_t bytes) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stats_.bytes_in_use + static_cast<int64_t>(bytes) > limit_) return nullptr;
      stats_.bytes_in_use += static_cast<int64_t>(bytes);
      ++blocks_out_;
      stats_.num_allocs++;
      if (stats_.bytes_in_use > stats_.peak_bytes_in_use) stats_.peak_bytes_in_use = stats_.bytes_in_use;
    }
    void* p = base_->allocate(bytes);
    if (!p) {
      std::lock_guard<std::mutex> lock(mu_);
      stats_.bytes_in_use -= static_cast<int64_t>(bytes);
      --blocks_out_;
    }
    return p;
  }

  void deallocate(void* ptr, size_t bytes) override {
    if (!ptr) return;
    base_->deallocate(ptr, bytes);
    bool last;
    {
      std::lock_guard<std::mutex> lock(mu_);
      stats_.bytes_in_use -= static_cast<int64_t>(bytes);
      --blocks_out_;
      last = retired_ && blocks_out_ == 0;
    }
    if (last) delete this;
  }

  // The owner is gone: free now if no block is out, else when the last one returns.
  void retire() {
    bool now;
    {
      std::lock_guard<std::mutex> lock(mu_);
      retired_ = true;
      now = blocks_out_ == 0;
    }
    if (now) delete this;
  }

  AllocatorStats stats() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
  }

 private:
  Allocator* base_;
  int64_t limit_;
  mutable std::mutex mu_;
  AllocatorStats stats_;
  int64_t blocks_out_ = 0;  // zero-byte blocks count too: each comes back once
  bool retired_ = false;
};

}  // namespace

void RetireAllocator::operator()(Allocator* a) const {
  if (auto* limited = dynamic_cast<LimitedAllocator*>(a)) limited->retire();
  else delete a;
}

AllocatorHandle make_limited_allocator(Allocator* base, int64_t limit_bytes) {
  return AllocatorHandle(new LimitedAllocator(base, limit_bytes));
}

}  // namespace actorflow
