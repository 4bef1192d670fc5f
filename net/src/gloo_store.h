// The rendezvous store of a GlooGroup (gloo_group.cpp): the keys live in a StoreService of
// one daemon of the cluster (the chief's), reached over the members' authenticated
// connections, and Gloo sees them through GenerationStore, one generation's view.
#pragma once

#include <gloo/rendezvous/store.h>

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "actorflow/net/cluster_spec.h"
#include "connection_client.h"

namespace actorflow::net {

// How often a wait on a key asks the store again.
inline constexpr auto kStorePoll = std::chrono::milliseconds(10);

// Gloo's Store reports failures by throwing; these never leave the group (form() and the
// group's thread catch every exception).
struct StoreError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// The generation being joined was replaced by a newer one: no member is missing from it.
struct Superseded : StoreError {
  using StoreError::StoreError;
};

// The member's connection to the store's daemon, re-dialed when it drops (the chief's
// daemon restarted), every request bounded by the caller's deadline.
class DaemonStoreClient {
 public:
  using Clock = std::chrono::steady_clock;
  DaemonStoreClient(HostPort where, std::string token, std::string space)
      : where_(std::move(where)), token_(std::move(token)), space_(std::move(space)) {}

  // The reply to one request, retried over a new connection until `deadline`.
  Result<StoreReplyMsg> request(const StoreRequestMsg& m, Clock::time_point deadline);
  Status set(const std::string& key, const std::string& value, Clock::time_point deadline);
  // Every key that starts with `prefix` goes.
  Status erase_prefix(const std::string& prefix, Clock::time_point deadline);
  // The value, or not_found.
  Result<std::string> get(const std::string& key, Clock::time_point deadline);

 private:
  HostPort where_;
  std::string token_;
  std::string space_;
  std::mutex mu_;
  std::unique_ptr<DaemonClient> client_;
};

// Gloo's view of the store for one generation's rendezvous. `abandon` is asked while
// waiting: a member whose generation was superseded gives up at once.
class GenerationStore final : public gloo::rendezvous::Store {
 public:
  using Clock = std::chrono::steady_clock;
  GenerationStore(DaemonStoreClient& client, Clock::time_point deadline, std::function<bool()> abandon)
      : client_(client), deadline_(deadline), abandon_(std::move(abandon)) {}
  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override { wait(keys, std::chrono::milliseconds(0)); }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override;

 private:
  DaemonStoreClient& client_;
  Clock::time_point deadline_;
  std::function<bool()> abandon_;
};

}  // namespace actorflow::net
