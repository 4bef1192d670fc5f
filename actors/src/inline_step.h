// A step run on the calling thread: for plans whose every node is cheap, a hop to a CAF
// worker and back costs more than the whole step; for serial plans and GPU plans, each
// hop adds to the step. Async kernels (a GPU's copies) run here too: the caller waits for
// one only when a consumer's turn comes.
#pragma once
#include <atomic>
#include <vector>

#include "node_actor.h"

namespace actorflow::runtime {

// Runs every node of `order` (a topological order of shared.nodes) once for `state`'s
// step, with the actors' semantics: an error becomes a token that its consumers pass
// on without running, the first error is the step's, fetches and targets report to
// `state`, kernels are traced. Does not complete `state`'s own extra count. Once `stop`
// (if given) is set, no further kernel runs: the step fails as cancelled (the session is
// closing), every fetch and target still reporting.
void run_step_inline(const ExecutorShared& shared, const std::vector<int>& order, const std::vector<FeedRoute>& routes,
                     const std::vector<Tensor>& feeds, StepState& state, const std::atomic<bool>* stop = nullptr);

}  // namespace actorflow::runtime
