// The rendezvous store a daemon serves to collective groups (Gloo's rendezvous::Store,
// PyTorch's TCPStore on rank 0): keys in namespaces, set, get and erase by prefix (a
// group's rank 0 drops a generation's keys when it publishes the next, so that a long job
// that forms its group again and again stays within the bounds), nothing else. Every
// length comes from a peer: keys, namespaces and values are bounded, and so are the
// entries and bytes the store holds in all, so a token holder cannot grow it without end.
#pragma once
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "frame_messages.h"

namespace actorflow::net {

class StoreService {
 public:
  static constexpr size_t kMaxSpaceBytes = 256;
  static constexpr size_t kMaxKeyBytes = 1024;
  static constexpr size_t kMaxValueBytes = 1 << 20;
  static constexpr size_t kMaxEntries = 65536;
  static constexpr size_t kMaxTotalBytes = 64 << 20;

  // A set overwrites (a member that restarted publishes its new address under its key).
  StoreReplyMsg handle(const StoreRequestMsg& m);
  size_t entries() const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, std::string>, std::string> values_;
  size_t bytes_ = 0;
};

}  // namespace actorflow::net
