// All-reduce training on GPUs: a CollectiveGroup (actorflow/collective.h) whose GPU
// tensors NCCL reduces and broadcasts, from GPU memory and in the order of the GPU's
// compute stream, as Horovod and PyTorch DDP do on GPUs. It stands on a host group (the
// cluster's Gloo group, actorflow/net/collective.h): that group carries NCCL's
// rendezvous (rank 0's ncclUniqueId, broadcast to the others) and every host tensor a
// collective op is given, so one session can hold both kinds.
//
//   auto gloo = net::GlooGroup::create(...);          // formed first
//   auto nccl = nccl_group(*gloo, {.gpu = 0});
//   (*nccl)->form(deadline);                          // after every (re)forming of gloo
//   af::SessionOptions o;
//   o.collective_group = *nccl;                       // collective ops placed on /gpu:0
//
// Every member must start the same ops in the same order, as with any CollectiveGroup; the
// buckets of one step must be all on the GPU or all on the host (the two groups order
// their buckets apart).
//
// NCCL (libnccl.so.2, from the CUDA toolkit or the nvidia-nccl wheel) is loaded the first
// time a group is made, not when the GPU module is: a machine without it keeps every
// other GPU kernel. A failed op (a member lost, a timeout) aborts the communicator and
// fails every later op until form() makes a new one.
#pragma once
#include "actorflow/api.h"
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "actorflow/collective.h"

AF_PUBLIC_BEGIN

namespace actorflow {

struct NcclGroupOptions {
  // The GPU this process reduces on (its collective ops run on /gpu:<gpu>).
  int gpu = 0;
  // An op not finished this long after it was queued fails, and the group with it.
  int64_t timeout_ms = 60000;
};

class NcclGroup : public CollectiveGroup {
 public:
  using Clock = std::chrono::steady_clock;
  // (Re)makes the communicator by `deadline`: rank 0 draws a new ncclUniqueId, the host
  // group broadcasts it, and every member joins. The host group must be formed.
  virtual Status form(Clock::time_point deadline) = 0;
  // Bytes this process's NCCL ops sent, counted as a ring sends them: 2 (n - 1) / n of
  // each all-reduced buffer, a broadcast's buffer once on the root.
  virtual uint64_t bytes_sent() const = 0;
  // The NCCL library's version, e.g. "2.30.7".
  virtual std::string nccl_version() const = 0;
};

// A group on `host`'s members (its rank and size), not formed yet. Unavailable without a
// GPU, without CUDA in this build, or without libnccl.so.2 on this machine; the status
// says which.
Result<std::shared_ptr<NcclGroup>> nccl_group(std::shared_ptr<CollectiveGroup> host,
                                              const NcclGroupOptions& options = {});

}  // namespace actorflow

AF_PUBLIC_END
