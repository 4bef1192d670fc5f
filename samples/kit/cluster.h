// A training sample as one task of a cluster, started the way the seeds start
// theirs, one process per task (with --replication in_graph only the chief is a client;
// the other workers serve towers like ps tasks serve variables):
//   cancer_classifier --ps_hosts=h:2222,h:2223 --worker_hosts=h:2224,h:2225 --job_name=ps --task_index=0
// or from TF_CONFIG, a --cluster_spec file, Slurm or Open MPI. A ps task serves its
// node daemon until the chief says training is over, then exits 0. A training task
// (worker or chief) starts its own daemon, places the variables on the ps tasks, and
// trains with the others (the library's loops, actorflow/net/training_loop.h). Without a
// cluster, nothing changes. What is the samples' own here: the flags, their checks and
// the ps task's RESULT line; the roles, daemons and peers are actorflow/net/training_task.h.
#pragma once
#include <cstddef>
#include <memory>
#include <string>

#include <actorflow/actorflow.h>
#include <actorflow/net/training_task.h>

#include "flags.h"

namespace kit {

struct ClusterTask {
  bool distributed = false;
  // This training task of the cluster, when distributed.
  std::unique_ptr<actorflow::net::TrainingTask> training;

  // The variables of the model built while the returned scope lives go to the ps tasks
  // (replica_device_setter, --ps_strategy), the rest to this task. Null when local.
  std::unique_ptr<actorflow::DeviceScope> place(actorflow::Graph& g) const;
  // The cluster's ps tasks (0 when local or under --strategy allreduce).
  size_t num_ps() const { return training ? training->ps.size() : 0; }
};

// Resolves the cluster from the flags and the environment; checks the distributed flags.
// A ps task never returns: it serves until the chief's Shutdown (exit 0) or SIGTERM.
// Errors end the program with a message naming what is wrong (exit 2).
std::unique_ptr<ClusterTask> start_task(const Flags& f, const std::string& program);

}  // namespace kit
