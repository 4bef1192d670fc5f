#include "actorflow/net/training_loop.h"

namespace actorflow::net {

const char* sync_mode_name(SyncMode mode) {
  switch (mode) {
    case SyncMode::sync:
      return "sync";
    case SyncMode::ssp:
      return "ssp";
    case SyncMode::async:
      break;
  }
  return "async";
}

Result<TrainResult> train_in_cluster(Graph& g, TrainableModel& m, const TrainingData& data, const TrainingLoopOptions& o,
                                     TrainingTask& task, optim::Optimizer* optimizer,
                                     const std::function<TrainableModel(Graph&)>& build_tower) {
  if (task.allreduce) return train_allreduce(g, m, data, o, task, optimizer);
  if (task.in_graph) return train_in_graph(g, m, build_tower, data, o, task);
  return train_with_ps(g, m, data, o, task, optimizer);
}

}  // namespace actorflow::net
