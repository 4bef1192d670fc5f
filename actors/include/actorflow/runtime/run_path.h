// Process-wide switches of the low-latency run path, read
// when a kind of step is prepared. All are on by default; AF_CALLER_RUNS_CHEAP_STEPS,
// AF_CALLER_RUNS_SERIAL_STEPS, AF_CALLER_RUNS_TRAINING_STEPS and AF_COLOCATE_CHEAP_OPS
// (0 or 1) set them for a whole
// process (A/B benchmarks); tests that count one actor per node turn them off around
// their sessions. A session can turn colocation and the caller's thread off for itself
// alone (GraphOptimizerOptions in session.h); it gets each only when both allow it.
#pragma once
#include "actorflow/api.h"

AF_PUBLIC_BEGIN

namespace actorflow::runtime {

struct RunPath {
  // A plan whose every node is cheap (see cheap_ops.h) runs on the thread that called
  // run(): no actor, no message, no thread hand-off. TF's executor runs inexpensive
  // kernels inline the same way.
  bool caller_runs_cheap_steps = true;
  // A cheap node whose every input comes from one actor runs in that actor, right after
  // its producer, instead of in an actor of its own: fewer actors and fewer messages.
  bool colocate_cheap_ops = true;
  // A plan of stateless synchronous kernels whose costly ones lie on one path (an MLP's
  // forward pass) runs on the caller's thread too, unless the step has a deadline: the
  // actors could not overlap its kernels anyway, and each hop costs a thread hand-off.
  // Its actors still exist for steps with a deadline. A plan with GPU nodes runs there
  // too (its compute kernels are done once queued on the one compute stream, so the
  // host's side of it is serial), unless it holds an async CPU kernel.
  bool caller_runs_serial_steps = true;
  // With caller_runs_serial_steps: a plan of synchronous kernels that holds stateful ones
  // (a training step: variable reads, their Apply updates, random ops) runs on the
  // caller's thread too, unless its step has a deadline, when it is *mostly serial*: the
  // estimated cost of its longest path is at least 80% of the whole plan's (run_placement.h,
  // is_mostly_serial), so the actors could overlap at most a fifth of its work, while the
  // caller's thread saves every hop and lets large products use the whole intra-op pool.
  // A stateful kernel runs under its lock on any thread, as it does in its actor; steps
  // of one caller run in order, concurrent callers each run their own step, as with
  // actors. Its actors still exist for steps with a deadline.
  bool caller_runs_training_steps = true;
};

RunPath run_path();
void set_run_path(const RunPath& p);

// Sets the switches for one scope (a test) and restores them after.
class ScopedRunPath {
 public:
  explicit ScopedRunPath(const RunPath& p) : saved_(run_path()) { set_run_path(p); }
  ~ScopedRunPath() { set_run_path(saved_); }
  ScopedRunPath(const ScopedRunPath&) = delete;
  ScopedRunPath& operator=(const ScopedRunPath&) = delete;

 private:
  RunPath saved_;
};

}  // namespace actorflow::runtime

AF_PUBLIC_END
