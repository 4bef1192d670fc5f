// The thread that starts a step and then waits for it runs the step's actors itself, as
// far as it can, instead of spinning while a scheduler thread wakes up to run them. A
// message a step's first actors get from this thread, and every message those actors
// send on while they run here, schedules its receiver on this thread's CallerUnit
// rather than on CAF's workers. The unit keeps one ready actor to run next and hands
// every further one to the workers at once, so parallel branches still run in parallel
// (TF's executor likewise runs one ready node inline and schedules the others). A chain
// of actors therefore costs no thread wake-up and no cache transfer per hop; an actor
// that waits for an async kernel is simply not ready, and the caller goes back to
// waiting when nothing is left for it.
#pragma once
#include <caf/all.hpp>

namespace actorflow::runtime {

class CallerUnit final : public caf::execution_unit {
 public:
  // This thread's unit, or null while the thread is already running actors on it (a
  // kernel that runs a step of its own): such a step's actors go to CAF's workers.
  static CallerUnit* acquire();

  void exec_later(caf::resumable* job) override;
  // Runs the actors scheduled on this unit until none is ready.
  void run();

 private:
  explicit CallerUnit(caf::actor_system& sys) : caf::execution_unit(&sys) {}
  caf::resumable* next_ = nullptr;  // the one actor this thread runs next
  bool running_ = false;
};

// Sends a message from outside any actor, scheduling an idle receiver on `unit` (CAF's
// workers when null).
template <class... Ts>
void send_on(caf::execution_unit* unit, const caf::actor& to, Ts&&... xs) {
  to->enqueue(caf::make_mailbox_element(nullptr, caf::make_message_id(), {}, std::forward<Ts>(xs)...), unit);
}

}  // namespace actorflow::runtime
