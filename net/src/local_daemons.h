// The daemons of this process, found by the address a cluster session dials, so that the
// session runs the partitions of its own process's daemon by direct calls, as
// TensorFlow's LocalMaster and local worker do (worker_interface.h's local worker). A
// worker task (a process with a daemon and a session) then sends no RunStep to itself
// over loopback and reads no StepDone back: no frames, no copies of its feeds and
// fetches, and two hand-offs between io threads fewer per step. Edges between daemons
// still travel between them, as before.
//
// AF_DIAL_OWN_DAEMON=1 in the environment turns this off: sessions dial every daemon.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <shared_mutex>
#include <string>

#include "frame_messages.h"
#include "partition_service.h"
#include "worker_pool.h"

namespace actorflow::net {

class LocalDaemon {
 public:
  using Clock = std::chrono::steady_clock;
  // `partitions` and `pool` are the daemon's (`pool` the threads that wait for partition
  // steps); they outlive every call, since the daemon calls shut() before freeing them.
  LocalDaemon(std::string task, PartitionService& partitions, WorkerPool& pool, std::atomic<int64_t>& steps_run,
              std::function<void(const std::string&)> log);

  // An owner id for one session's partitions, above every connection id of the daemon.
  uint64_t new_owner();
  Result<uint64_t> register_partition(const RegisterGraphMsg& m, uint64_t owner, Clock::time_point deadline);
  // Starts the step now, on this thread (the caller starts a session's steps in one
  // order); `done` runs once it has finished: here, at once, when it ended where it
  // started (cheap kernels only, or it could not start), else on a daemon worker thread.
  void run_step(const RunStepMsg& m, uint64_t owner, std::function<void(StepDoneMsg)> done);
  void abort_step(uint64_t handle, uint64_t step, const Status& why, uint64_t owner);
  // Ends the steps of partition `handle` and frees it (never on an io thread).
  void close_partition(uint64_t handle, uint64_t owner);
  // Frees the owner's partitions (stops their actors: never on an io thread).
  void close_owner(uint64_t owner);
  // False once the daemon has begun to stop.
  bool alive() const;
  const std::string& task() const { return task_; }

  // The daemon is stopping: calls from now on fail (unavailable), naming the task.
  void shut();

 private:
  Status stopped() const;

  std::string task_;
  mutable std::shared_mutex mu_;
  bool shut_ = false;
  PartitionService* partitions_;
  WorkerPool* pool_;
  std::atomic<int64_t>* steps_run_;
  std::function<void(const std::string&)> log_;
  std::atomic<uint64_t> next_owner_{uint64_t{1} << 62};
};

// The daemon listening on `bound_host`:`port` in this process is reachable by direct
// calls from now on, until withdrawn.
void publish_local_daemon(const std::string& bound_host, uint16_t port, std::shared_ptr<LocalDaemon> d);
void withdraw_local_daemon(const LocalDaemon* d);
// The daemon of this process that a dial of host:port would reach, or null: same port,
// and a host naming this machine as the daemon listens on it (its own host string, a
// loopback name or address, or this machine's hostname when it listens on every
// interface).
std::shared_ptr<LocalDaemon> find_local_daemon(const std::string& host, uint16_t port);

}  // namespace actorflow::net
