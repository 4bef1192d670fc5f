#include "store_service.h"

namespace actorflow::net {

StoreReplyMsg StoreService::handle(const StoreRequestMsg& m) {
  StoreReplyMsg r;
  r.request_id = m.request_id;
  if (m.space.empty() || m.space.size() > kMaxSpaceBytes || m.key.empty() || m.key.size() > kMaxKeyBytes) {
    r.status = invalid_argument("a store namespace holds 1 to " + std::to_string(kMaxSpaceBytes) +
                                " bytes and a key 1 to " + std::to_string(kMaxKeyBytes) + " (got " +
                                std::to_string(m.space.size()) + " and " + std::to_string(m.key.size()) + ")");
    return r;
  }
  std::lock_guard<std::mutex> lock(mu_);
  auto key = std::make_pair(m.space, m.key);
  if (!m.set && m.erase_prefix) {
    auto it = values_.lower_bound(key);
    size_t erased = 0;
    while (it != values_.end() && it->first.first == m.space && it->first.second.starts_with(m.key)) {
      bytes_ -= it->first.first.size() + it->first.second.size() + it->second.size();
      it = values_.erase(it);
      ++erased;
    }
    r.value = std::to_string(erased);
    return r;
  }
  auto it = values_.find(key);
  if (!m.set) {
    if (it == values_.end()) r.status = Status(Code::not_found, "no key '" + m.key + "' in the store yet");
    else r.value = it->second;
    return r;
  }
  if (m.value.size() > kMaxValueBytes) {
    r.status = invalid_argument("a store value holds at most " + std::to_string(kMaxValueBytes) + " bytes, got " +
                                std::to_string(m.value.size()));
    return r;
  }
  size_t old = it == values_.end() ? 0 : key.first.size() + key.second.size() + it->second.size();
  size_t now = key.first.size() + key.second.size() + m.value.size();
  if ((it == values_.end() && values_.size() >= kMaxEntries) || bytes_ - old + now > kMaxTotalBytes) {
    r.status = Status(Code::resource_exhausted, "the rendezvous store is full (" + std::to_string(values_.size()) +
                                                    " keys, " + std::to_string(bytes_) + " bytes)");
    return r;
  }
  bytes_ = bytes_ - old + now;
  values_[key] = m.value;
  return r;
}

size_t StoreService::entries() const {
  std::lock_guard<std::mutex> lock(mu_);
  return values_.size();
}

}  // namespace actorflow::net
