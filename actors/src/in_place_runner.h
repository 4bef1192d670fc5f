// The thread that starts a step and then waits for it runs the step's actors itself, as
// far as it can, instead of spinning while a scheduler thread wakes up to run them.
// A CAF worker's turn of a node actor has no runner: an actor that one of them makes
// ready becomes a job of its own, which CAF spreads over the workers. (Workers that ran
// what they made ready in place trained the all-reduce CNN about 6% slower: the branches
// they handed on sat in their own busy queue while the other workers slept between polls.)
// A node actor whose inbox a thread takes over (node_actor.h) goes to that thread's
// runner. As in TF's executor, quick actors run here first: those of cheap kernels, and
// those of async kernels (an all-reduce, a _Send), whose turn only starts work that then
// overlaps what this thread computes next. Of the costly ones, the runner keeps the
// newest for itself and hands the others to CAF's workers, so parallel branches still
// run in parallel: newest first is the order a CAF worker runs the actors that its own
// actor made ready, and it lets the cheap end of a backward pass (a bias gradient that
// completes a gradient bucket) run before the long matmul beside it. CAF's workers poll
// rather than wake on new work, so a handed-over actor that no worker has taken yet when
// this thread is free again is taken back and run here.
//
// A chain of actors therefore costs no thread wake-up, no CAF message and no cache
// transfer per hop; an actor that waits for an async kernel is simply not ready, and the
// thread goes back to waiting when nothing is left for it.
#pragma once
#include <vector>

namespace actorflow::runtime {

class NodeActor;

class InPlaceRunner {
 public:
  // The runner active on this thread; null when none is, or while a scope has
  // suspended it.
  static InPlaceRunner* current();

  // Takes an actor whose inbox this thread owns.
  void add(NodeActor* actor);
  // Runs the actors added here until none is left.
  void run();

 private:
  std::vector<NodeActor*> quick_;
  NodeActor* next_ = nullptr;        // the costly one kept here
  std::vector<NodeActor*> handed_;   // handed to the workers; taken back newest first
};

// Makes this thread's runner for a scope. With `run_here`, and no runner active yet, the
// scope activates its own; otherwise the scope has none, suspending an outer one: a
// kernel that runs a step of its own inside an actor that this thread runs must not
// queue that step's actors behind itself, and a caller with a deadline must stay free to
// stop waiting.
class InPlaceScope {
 public:
  explicit InPlaceScope(bool run_here);
  ~InPlaceScope();
  InPlaceScope(const InPlaceScope&) = delete;
  InPlaceScope& operator=(const InPlaceScope&) = delete;

  // Runs what the scope's runner holds (nothing when the scope has none).
  void run();

 private:
  InPlaceRunner own_;
  InPlaceRunner* outer_;
  bool active_ = false;
};

}  // namespace actorflow::runtime
