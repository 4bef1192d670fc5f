// The training loop of a worker or chief of a cluster (cluster.h), between-graph
// replication: every training task builds the same graph, the variables live on the ps
// tasks, and each task trains on its shard of the data (worker i of n: records i, i+n, ...).
//   --sync_mode async  each update is applied on the ps as it arrives;
//   --sync_mode sync   a round averages --replicas_to_aggregate gradients per variable on
//                      the ps and applies them once (distributed.h);
//   --sync_mode ssp    async updates, but no worker runs more than --staleness clocks
//                      ahead of the slowest.
// Training ends when the global step reaches --epoch_number epochs of the whole data (or
// --max_steps). The chief initializes or restores the variables, checkpoints, writes the
// summaries, waits for the others to finish, evaluates, and tells the ps tasks to stop.
#pragma once
#include <functional>

#include "cluster.h"
#include "trainer.h"

namespace kit {

// In-graph replication (--replication in_graph): the chief alone is a client. `m` is its
// own tower; `build` makes one more per other training task, under that task's device
// and a reusing variable scope, so all towers share the variables on the ps. Each step
// feeds every tower its slice of one global batch, averages the towers' gradients where
// each variable lives, and applies them once.
actorflow::Result<TrainResult> train_in_graph(actorflow::Graph& g, Model& m,
                                              const std::function<Model(actorflow::Graph&)>& build, const Split& data,
                                              const Flags& f, ClusterTask& task);

actorflow::Result<TrainResult> train_distributed(actorflow::Graph& g, Model& m, const Split& data, const Flags& f,
                                                 ClusterTask& task, actorflow::optim::Optimizer* optimizer = nullptr);

}  // namespace kit
