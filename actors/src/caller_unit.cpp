// A step's actors run on the thread that waits for the step (caller_unit.h).
#include "caller_unit.h"

#include <utility>

#include "actor_system.h"

namespace actorflow::runtime {
namespace {

// Messages one actor handles per turn here before the next ready actor gets the thread;
// what is left of its mailbox then goes to the workers.
constexpr size_t kThroughput = 64;

}  // namespace

CallerUnit* CallerUnit::acquire() {
  // One per thread for the thread's life: an actor keeps a pointer to the unit it last
  // ran on until its next turn, so the unit must outlive any step.
  thread_local CallerUnit unit(actor_system());
  return unit.running_ ? nullptr : &unit;
}

void CallerUnit::exec_later(caf::resumable* job) {
  if (next_ == nullptr) {
    next_ = job;
    return;
  }
  // A second ready actor: a branch that can run beside this thread's.
  system().scheduler().enqueue(job);
}

void CallerUnit::run() {
  running_ = true;
  while (caf::resumable* job = std::exchange(next_, nullptr)) {
    switch (job->resume(this, kThroughput)) {
      case caf::resumable::resume_later:
        // Its mailbox still holds messages; it keeps its reference, here while nothing
        // else is ready, else on the workers.
        exec_later(job);
        break;
      case caf::resumable::done:
      case caf::resumable::awaiting_message:
      case caf::resumable::shutdown_execution_unit:
        // The reference taken when it was scheduled here.
        caf::intrusive_ptr_release(job);
        break;
    }
  }
  running_ = false;
}

}  // namespace actorflow::runtime
