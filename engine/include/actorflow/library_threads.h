// How the threads ActorFlow starts run: its actor scheduler's workers, the CPU device's
// pool, the daemons' and connections' network threads, the collective groups' threads,
// Gloo's event loop and the coordination ops' deadline timer. Each is named (af-actor,
// af-cpu, af-daemon-io, ...: what top -H, ps -L, perf and gdb show; Gloo's loop keeps its
// creator's) and runs under Linux's SCHED_BATCH policy. The threads of the program that
// calls the library keep their own names and policy, and so do the GPU module's event
// poller (its effect on GPU steps not measured yet) and a daemon's short-lived stop
// watchers.
//
// Why SCHED_BATCH: a step is a chain of hand-offs between these threads (a message to an
// actor, a block to the pool, bytes to a network thread), and under the default policy a
// hand-off's wake-up may preempt the thread that made it before it has finished the work
// it was about to hand off next. A SCHED_BATCH thread is never woken into preempting
// another: it runs at once on an idle core, otherwise when the running thread blocks or
// its slice ends, and its share of the CPU is the same. Measured on 2 cores: the
// Fashion-MNIST MLP on 2 all-reduce workers trained at 73-76,000 examples/s against
// 61-64,000 with only Gloo's loop under it, on 1 ps and 2 async workers at 38-39,000
// against 31-32,000; the CNN did not change.
//
// AF_SCHED_BATCH=0 leaves every thread under the policy it starts with (to measure it).
// A thread under a policy other than SCHED_OTHER (real-time, SCHED_IDLE) is never switched.
#pragma once

#include "actorflow/api.h"

AF_PUBLIC_BEGIN
namespace actorflow {

// Names this thread `name` (cut to the 15 bytes Linux keeps) and puts it under
// SCHED_BATCH (batch_policy_on_this_thread): first thing in a thread that does only the
// library's work.
void enter_library_thread(const char* name);

// Puts this thread under SCHED_BATCH, when it runs under SCHED_OTHER and AF_SCHED_BATCH
// is not 0. Returns whether it switched.
bool batch_policy_on_this_thread();

// This thread under SCHED_BATCH (as above) for the guard's lifetime, then under
// SCHED_OTHER again: around a call that starts threads in another library, which inherit
// the policy of the thread that creates them.
class ScopedBatchPolicy {
 public:
  ScopedBatchPolicy();
  ~ScopedBatchPolicy();
  ScopedBatchPolicy(const ScopedBatchPolicy&) = delete;
  ScopedBatchPolicy& operator=(const ScopedBatchPolicy&) = delete;

 private:
  bool switched_ = false;
};

}  // namespace actorflow
AF_PUBLIC_END
