// The two workers (worker_interface.h): a daemon of this process by direct calls, and a
// daemon over a connection.
#include "worker_interface.h"

#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>

#include "connection_client.h"
#include "local_daemons.h"

namespace actorflow::net {

Result<StepDoneMsg> WorkerInterface::run_step(RunStepMsg m, Clock::time_point deadline) {
  uint64_t step = m.step_id;
  AF_RETURN_IF_ERROR(start_step(std::move(m), deadline, [] {}));
  return wait_step(step, deadline);
}

namespace {

// A daemon of this process: no frames, no copies of feeds and fetches, no hand-off
// between io threads. Its partitions belong to this worker's owner id and are freed with
// it, as closing a connection frees a remote daemon's.
class LocalWorker final : public WorkerInterface {
 public:
  LocalWorker(std::shared_ptr<LocalDaemon> daemon, std::string label)
      : daemon_(std::move(daemon)), owner_(daemon_->new_owner()), label_(std::move(label)) {}
  ~LocalWorker() override { daemon_->close_owner(owner_); }

  const std::string& label() const override { return label_; }
  bool alive() const override { return daemon_->alive(); }

  Result<uint64_t> register_partition(RegisterGraphMsg m, Clock::time_point deadline) override {
    return daemon_->register_partition(m, owner_, deadline);
  }

  Status start_step(RunStepMsg m, Clock::time_point deadline, std::function<void()> on_done) override {
    uint64_t step = m.step_id;
    if (deadline != DaemonClient::kNoDeadline) m.timeout_ms = DaemonClient::timeout_ms_until(deadline);
    {
      std::lock_guard<std::mutex> lock(answers_->mu);
      if (!answers_->steps.emplace(step, std::nullopt).second)
        return internal_error("step id " + std::to_string(step) + " started twice on " + label_);
    }
    daemon_->run_step(m, owner_, [answers = answers_, step, on_done = std::move(on_done)](StepDoneMsg d) {
      {
        std::lock_guard<std::mutex> lock(answers->mu);
        auto it = answers->steps.find(step);
        // Not there: its waiter gave up at its deadline and no one reads it any more.
        if (it == answers->steps.end()) return;
        it->second = std::move(d);
      }
      answers->cv.notify_all();
      on_done();
    });
    return Status::OK();
  }

  Result<StepDoneMsg> wait_step(uint64_t step, Clock::time_point deadline) override {
    std::unique_lock<std::mutex> lock(answers_->mu);
    auto it = answers_->steps.find(step);
    if (it == answers_->steps.end()) return internal_error("step id " + std::to_string(step) + " was not started");
    answers_->cv.wait_until(lock, deadline, [&] { return it->second.has_value(); });
    std::optional<StepDoneMsg> answer = std::move(it->second);
    answers_->steps.erase(it);
    if (!answer)
      return deadline_exceeded("step " + std::to_string(step) + " did not finish on " + label_ + " by its deadline");
    return std::move(*answer);
  }

  void cleanup_step(uint64_t handle, uint64_t step, const Status& why) override {
    daemon_->abort_step(handle, step, why, owner_);
  }
  void close_partition(uint64_t handle) override { daemon_->close_partition(handle, owner_); }

 private:
  // Shared with the daemon's callbacks, which may outlive a worker whose session gave up.
  struct Answers {
    std::mutex mu;
    std::condition_variable cv;
    std::map<uint64_t, std::optional<StepDoneMsg>> steps;
  };
  std::shared_ptr<LocalDaemon> daemon_;
  uint64_t owner_;
  std::string label_;
  std::shared_ptr<Answers> answers_ = std::make_shared<Answers>();
};

// A daemon over an authenticated connection; closing it frees its partitions there.
class RemoteWorker final : public WorkerInterface {
 public:
  RemoteWorker(std::unique_ptr<DaemonClient> client, std::string label)
      : client_(std::move(client)), label_(std::move(label)) {}

  const std::string& label() const override { return label_; }
  bool alive() const override { return client_->alive(); }

  Result<uint64_t> register_partition(RegisterGraphMsg m, Clock::time_point deadline) override {
    return client_->register_message(std::move(m), deadline);
  }
  Status start_step(RunStepMsg m, Clock::time_point deadline, std::function<void()> on_done) override {
    uint64_t step = m.step_id;
    AF_RETURN_IF_ERROR(client_->start_step(std::move(m), deadline));
    client_->notify_when_done(step, std::move(on_done));
    return Status::OK();
  }
  Result<StepDoneMsg> wait_step(uint64_t step, Clock::time_point deadline) override {
    return client_->wait_step(step, deadline);
  }
  Result<StepDoneMsg> run_step(RunStepMsg m, Clock::time_point deadline) override {
    return client_->run_step(std::move(m), deadline);
  }
  void cleanup_step(uint64_t handle, uint64_t step, const Status& why) override {
    client_->cleanup_step(handle, step, why);
  }
  void close_partition(uint64_t handle) override { client_->close_graph(handle); }

 private:
  std::unique_ptr<DaemonClient> client_;
  std::string label_;
};

}  // namespace

Result<std::shared_ptr<WorkerInterface>> connect_worker(const std::string& host, uint16_t port, const std::string& token,
                                                        const std::string& label,
                                                        WorkerInterface::Clock::time_point deadline) {
  if (auto local = find_local_daemon(host, port))
    return std::shared_ptr<WorkerInterface>(std::make_shared<LocalWorker>(std::move(local), label + " (this process)"));
  AF_ASSIGN_OR_RETURN(std::unique_ptr<DaemonClient> client, DaemonClient::connect(host, port, token, label, deadline));
  return std::shared_ptr<WorkerInterface>(std::make_shared<RemoteWorker>(std::move(client), label));
}

}  // namespace actorflow::net
