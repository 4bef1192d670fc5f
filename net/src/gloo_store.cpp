#include "gloo_store.h"

#include <algorithm>
#include <thread>

namespace actorflow::net {
namespace {
constexpr auto kStoreRequestTimeout = std::chrono::seconds(5);
}  // namespace

Result<StoreReplyMsg> DaemonStoreClient::request(const StoreRequestMsg& m, Clock::time_point deadline) {
  std::lock_guard<std::mutex> lock(mu_);
  Status last(Code::unavailable, "no attempt");
  for (int attempt = 0; attempt < 1000 && Clock::now() < deadline; ++attempt) {
    if (!client_ || !client_->alive()) {
      client_.reset();
      auto c = DaemonClient::connect(where_.host, where_.port, token_, "af://" + where_.to_string(),
                                     std::min(deadline, Clock::now() + kStoreRequestTimeout));
      if (!c.ok()) {
        last = c.status();
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        continue;
      }
      client_ = std::move(*c);
    }
    StoreRequestMsg req = m;
    req.space = space_;
    auto r = client_->store(std::move(req), std::min(deadline, Clock::now() + kStoreRequestTimeout));
    if (r.ok()) return r;
    last = r.status();
  }
  return Status(Code::unavailable, "the rendezvous store at " + where_.to_string() + " did not answer: " + last.message());
}

Status DaemonStoreClient::set(const std::string& key, const std::string& value, Clock::time_point deadline) {
  StoreRequestMsg m;
  m.set = true;
  m.key = key;
  m.value = value;
  AF_ASSIGN_OR_RETURN(auto r, request(m, deadline));
  return r.status;
}

Status DaemonStoreClient::erase_prefix(const std::string& prefix, Clock::time_point deadline) {
  StoreRequestMsg m;
  m.erase_prefix = true;
  m.key = prefix;
  AF_ASSIGN_OR_RETURN(auto r, request(m, deadline));
  return r.status;
}

Result<std::string> DaemonStoreClient::get(const std::string& key, Clock::time_point deadline) {
  StoreRequestMsg m;
  m.key = key;
  AF_ASSIGN_OR_RETURN(auto r, request(m, deadline));
  if (!r.status.ok()) return r.status;
  return std::move(r.value);
}

void GenerationStore::set(const std::string& key, const std::vector<char>& data) {
  Status s = client_.set(key, std::string(data.begin(), data.end()), deadline_);
  if (!s.ok()) throw StoreError(s.to_string());
}

std::vector<char> GenerationStore::get(const std::string& key) {
  wait({key});
  auto v = client_.get(key, deadline_);
  if (!v.ok()) throw StoreError(v.status().to_string());
  return std::vector<char>(v->begin(), v->end());
}

void GenerationStore::wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) {
  auto until = timeout.count() > 0 ? std::min(deadline_, Clock::now() + timeout) : deadline_;
  for (const auto& key : keys) {
    while (true) {
      auto v = client_.get(key, until);
      if (v.ok()) break;
      if (v.status().code() != Code::not_found) throw StoreError(v.status().to_string());
      if (abandon_ && abandon_()) throw Superseded("a newer generation of the group was published");
      if (Clock::now() + kStorePoll >= until) throw StoreError("timed out waiting for '" + key + "' in the rendezvous store");
      std::this_thread::sleep_for(kStorePoll);
    }
  }
}

}  // namespace actorflow::net
