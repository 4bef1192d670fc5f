// The training loop of a worker under --strategy allreduce: no ps; every training task
// holds the whole model in an in-process session, computes gradients on its shard of the
// data (worker i of n: records i, i+n, ...), and the graph's CollectiveAllReduce nodes
// (actorflow/collective.h) average them over every worker with Gloo, bucket by bucket as
// the backward pass produces them (--allreduce_bucket_bytes). Synchronous data-parallel
// training: one global step is every worker's step.
//
// The group is formed through a rendezvous store served by the chief's daemon; every
// worker starts from the chief's values (a broadcast), and only the chief writes
// checkpoints and summaries. A lost worker fails every survivor's step (naming it) within
// --step_timeout_ms; everyone then waits for the group to form again (the lost worker
// restarted with the same command), the chief restores the last checkpoint and
// broadcasts it, and training goes on from there, as MultiWorkerMirroredStrategy resumes
// after a restart.
#pragma once
#include "cluster.h"
#include "trainer.h"

namespace kit {

// `optimizer`: the loop's (--optimizer) unless the model lists its own, or null to make it here.
actorflow::Result<TrainResult> train_allreduce(actorflow::Graph& g, Model& m, const Split& data, const Flags& f,
                                               ClusterTask& task, actorflow::optim::Optimizer* optimizer = nullptr);

}  // namespace kit
