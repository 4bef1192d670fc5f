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
#include "cluster.h"
#include "trainer.h"

namespace kit {

actorflow::Result<TrainResult> train_distributed(actorflow::Graph& g, Model& m, const Split& data, const Flags& f,
                                                 ClusterTask& task, actorflow::optim::Optimizer* optimizer = nullptr);

}  // namespace kit
