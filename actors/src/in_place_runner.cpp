// A step's actors run on the thread that waits for the step (in_place_runner.h).
#include "in_place_runner.h"

#include <utility>

#include "node_actor.h"

namespace actorflow::runtime {
namespace {

thread_local InPlaceRunner* t_runner = nullptr;

}  // namespace

InPlaceRunner* InPlaceRunner::current() { return t_runner; }

void InPlaceRunner::add(NodeActor* actor) {
  if (actor->quick()) {
    quick_.push_back(actor);
    return;
  }
  if (next_ != nullptr) {
    // A second costly actor: a branch that can run beside this thread's.
    next_->hand_to_workers();
    handed_.push_back(next_);
  }
  next_ = actor;
}

void InPlaceRunner::run() {
  for (;;) {
    if (!quick_.empty()) {
      NodeActor* actor = quick_.back();
      quick_.pop_back();
      actor->run_here();
    } else if (next_ != nullptr) {
      std::exchange(next_, nullptr)->run_here();
    } else if (!handed_.empty()) {
      NodeActor* actor = handed_.back();
      handed_.pop_back();
      // A worker may have taken it meanwhile; then that worker runs it.
      if (actor->take_back()) actor->run_here();
    } else {
      return;
    }
  }
}

InPlaceScope::InPlaceScope(bool run_here) : outer_(t_runner) {
  active_ = run_here && outer_ == nullptr;
  t_runner = active_ ? &own_ : nullptr;
}

InPlaceScope::~InPlaceScope() {
  // An actor left here would keep its inbox owned with nobody to run it.
  if (active_) own_.run();
  t_runner = outer_;
}

void InPlaceScope::run() {
  if (active_) own_.run();
}

}  // namespace actorflow::runtime
