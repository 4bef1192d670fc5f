// One worker as a cluster session sees it (TF's WorkerInterface): register a partition,
// run its steps, end a step that failed elsewhere, close the partition. A worker is a
// daemon's face for one session and one location. It has two implementations: a daemon of
// this process, reached by direct calls (as TensorFlow's local worker is), and a daemon
// reached over a connection. The session never asks which.
//
// Steps of one worker start in the order of the start_step calls. A step's answer is
// keyed by its step id, which is why a session holds one worker per location: two
// partitions of one step on one daemon (its CPU and its GPU) answer with the same id.
#pragma once
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "frame_messages.h"

namespace actorflow::net {

class WorkerInterface {
 public:
  using Clock = std::chrono::steady_clock;
  virtual ~WorkerInterface() = default;

  // The daemon in errors: "af://127.0.0.1:2222 (/job:ps/task:0)".
  virtual const std::string& label() const = 0;
  // False once the daemon went away (its connection closed, or it began to stop): the
  // session registers its partitions afresh, with another worker.
  virtual bool alive() const = 0;

  // Registers one partition (RegisterGraphMsg::location set) by `deadline`; its handle.
  virtual Result<uint64_t> register_partition(RegisterGraphMsg m, Clock::time_point deadline) = 0;
  // Starts one step of partition m.handle with the step's deadline. `on_done` runs once
  // when its answer is here or can no longer come, on any thread (this one, before
  // start_step returns, when the step ended at once); wait_step then returns at once.
  // An error here means the step did not start; on_done is not called then.
  virtual Status start_step(RunStepMsg m, Clock::time_point deadline, std::function<void()> on_done) = 0;
  // The answer of a started step, waiting for it by `deadline`; a late step fails, naming
  // this worker.
  virtual Result<StepDoneMsg> wait_step(uint64_t step_id, Clock::time_point deadline) = 0;
  // start_step then wait_step, for a step of one partition: a connection may drive its
  // socket on the calling thread instead (connection_client.h's fast path).
  virtual Result<StepDoneMsg> run_step(RunStepMsg m, Clock::time_point deadline);
  // Step `step` of partition `handle` failed elsewhere: end it here now.
  virtual void cleanup_step(uint64_t handle, uint64_t step, const Status& why) = 0;
  virtual void close_partition(uint64_t handle) = 0;
};

// A worker for the daemon at host:port: this process's own by direct calls when one
// listens there (local_daemons.h), else a new authenticated connection, made by
// `deadline`. `label` names it in errors.
Result<std::shared_ptr<WorkerInterface>> connect_worker(const std::string& host, uint16_t port, const std::string& token,
                                                        const std::string& label,
                                                        WorkerInterface::Clock::time_point deadline);

}  // namespace actorflow::net
