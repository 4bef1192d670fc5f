// Memory for tensor buffers. The CPU allocator pools large blocks in size classes,
// because first-touching fresh pages costs ~3 us each on our machines and glibc hands
// blocks >= 128 KiB straight back to the kernel.
#pragma once
#include "actorflow/api.h"
#include <cstddef>
#include <cstdint>
#include <memory>

#include "actorflow/device.h"

AF_PUBLIC_BEGIN

namespace actorflow {

inline constexpr size_t kTensorAlignment = 64;

struct AllocatorStats {
  int64_t bytes_in_use = 0;
  int64_t peak_bytes_in_use = 0;
  int64_t bytes_cached = 0;   // freed blocks kept for reuse
  int64_t num_allocs = 0;
  int64_t num_pool_hits = 0;
};

class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual const char* name() const = 0;
  virtual DeviceId device() const = 0;
  // Returns a kTensorAlignment-aligned block of at least `bytes`, or nullptr.
  virtual void* allocate(size_t bytes) = 0;
  virtual void deallocate(void* ptr, size_t bytes) = 0;
  virtual AllocatorStats stats() const = 0;
  // Returns cached blocks to the system.
  virtual void release_cached() {}
};

// The process-wide pooling CPU allocator.
Allocator* cpu_allocator();

// The owner's handle to an allocator whose blocks may outlive the owner (a session's
// fetched tensors and variables): dropping the handle frees the allocator once its last
// block has come back.
struct RetireAllocator {
  void operator()(Allocator* a) const;
};
using AllocatorHandle = std::unique_ptr<Allocator, RetireAllocator>;

// An allocator that hands out blocks of `base` while its own bytes in use stay within
// `limit_bytes`, and returns nullptr beyond (a session's memory budget: the kernel that
// asks for too much fails its step with resource_exhausted instead of taking the machine).
AllocatorHandle make_limited_allocator(Allocator* base, int64_t limit_bytes);

}  // namespace actorflow

AF_PUBLIC_END
