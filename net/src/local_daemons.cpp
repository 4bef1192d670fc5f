#include "local_daemons.h"
#include "actorflow/environment.h"

#include <unistd.h>

#include <cstdlib>
#include <mutex>
#include <vector>


namespace actorflow::net {

LocalDaemon::LocalDaemon(std::string task, PartitionService& partitions, WorkerPool& pool,
                         std::atomic<int64_t>& steps_run, std::function<void(const std::string&)> log)
    : task_(std::move(task)), partitions_(&partitions), pool_(&pool), steps_run_(&steps_run), log_(std::move(log)) {}

uint64_t LocalDaemon::new_owner() { return next_owner_++; }

Status LocalDaemon::stopped() const {
  return Status(Code::unavailable, "the daemon of " + task_ + " in this process has stopped");
}

bool LocalDaemon::alive() const {
  std::shared_lock<std::shared_mutex> lock(mu_);
  return !shut_;
}

Result<uint64_t> LocalDaemon::register_partition(const RegisterGraphMsg& m, uint64_t owner, Clock::time_point deadline) {
  std::shared_lock<std::shared_mutex> lock(mu_);
  if (shut_) return stopped();
  auto h = partitions_->register_partition(m, owner, deadline);
  log_("partition " + m.location + " for a session of this process" +
       (h.ok() ? " registered as " + std::to_string(*h) : ": " + h.status().to_string()));
  return h;
}

void LocalDaemon::run_step(const RunStepMsg& m, uint64_t owner, std::function<void(StepDoneMsg)> done) {
  std::shared_lock<std::shared_mutex> lock(mu_);
  if (shut_) {
    lock.unlock();
    done(StepDoneMsg{m.step_id, stopped(), {}});
    return;
  }
  auto started = partitions_->start_step(m, owner);
  auto finish = [this, started, step = m.step_id, done = std::move(done)] {
    StepDoneMsg d = partitions_->finish_step(*started);
    ++*steps_run_;
    if (!d.status.ok()) log_("partition step " + std::to_string(step) + " for a session of this process failed: " + d.status.to_string());
    done(std::move(d));
  };
  if (PartitionService::ended(*started)) {
    lock.unlock();
    finish();
    return;
  }
  // The worker pool runs its queued jobs before it stops, and the partitions are freed
  // only after that: the job needs no lock.
  pool_->post(std::move(finish));
}

void LocalDaemon::abort_step(uint64_t handle, uint64_t step, const Status& why, uint64_t owner) {
  std::shared_lock<std::shared_mutex> lock(mu_);
  if (!shut_) partitions_->abort_step(handle, step, why, owner);
}

void LocalDaemon::close_partition(uint64_t handle, uint64_t owner) {
  std::shared_lock<std::shared_mutex> lock(mu_);
  if (shut_) return;
  partitions_->abort_graph(handle, owner, PartitionService::closed_by_client());
  if (partitions_->close_graph(handle, owner)) log_("freed partition " + std::to_string(handle) + " of a session of this process");
}

void LocalDaemon::close_owner(uint64_t owner) {
  std::shared_lock<std::shared_mutex> lock(mu_);
  if (shut_) return;
  size_t n = partitions_->close_owner(owner);
  if (n > 0) log_("freed " + std::to_string(n) + " graph(s) of a session of this process");
}

void LocalDaemon::shut() {
  std::unique_lock<std::shared_mutex> lock(mu_);
  shut_ = true;
}

namespace {

struct Published {
  std::string host;
  uint16_t port;
  std::shared_ptr<LocalDaemon> daemon;
};

std::mutex& registry_mu() {
  static std::mutex mu;
  return mu;
}
std::vector<Published>& registry() {
  static std::vector<Published> r;
  return r;
}

bool is_loopback_name(const std::string& h) {
  return h == "localhost" || h == "::1" || h == "[::1]" || h.rfind("127.", 0) == 0;
}
bool is_wildcard(const std::string& h) { return h == "0.0.0.0" || h == "::" || h == "[::]" || h.empty(); }

std::string this_hostname() {
  char name[256] = {0};
  if (gethostname(name, sizeof name - 1) != 0) return {};
  return name;
}

bool reaches(const Published& p, const std::string& host) {
  if (host == p.host) return true;
  // A daemon on every interface or on loopback answers a dial of a loopback address.
  if (is_loopback_name(host)) return is_wildcard(p.host) || is_loopback_name(p.host);
  if (is_wildcard(p.host)) return host == this_hostname();
  return false;
}

}  // namespace

void publish_local_daemon(const std::string& bound_host, uint16_t port, std::shared_ptr<LocalDaemon> d) {
  std::lock_guard<std::mutex> lock(registry_mu());
  registry().push_back(Published{bound_host, port, std::move(d)});
}

void withdraw_local_daemon(const LocalDaemon* d) {
  std::lock_guard<std::mutex> lock(registry_mu());
  auto& r = registry();
  for (auto it = r.begin(); it != r.end();)
    it = it->daemon.get() == d ? r.erase(it) : it + 1;
}

std::shared_ptr<LocalDaemon> find_local_daemon(const std::string& host, uint16_t port) {
  if (const char* v = environment_switch(EnvironmentSwitch::dial_own_daemon); v && std::string(v) == "1") return nullptr;
  std::lock_guard<std::mutex> lock(registry_mu());
  for (auto& p : registry())
    if (p.port == port && reaches(p, host) && p.daemon->alive()) return p.daemon;
  return nullptr;
}

}  // namespace actorflow::net
