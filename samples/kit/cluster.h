// A training sample as one task of a cluster, started the way the seeds start
// theirs, one process per task (with --replication in_graph only the chief is a client;
// the other workers serve towers like ps tasks serve variables):
//   cancer_classifier --ps_hosts=h:2222,h:2223 --worker_hosts=h:2224,h:2225 --job_name=ps --task_index=0
// or from TF_CONFIG, a --cluster_spec file, Slurm or Open MPI. A ps task serves its
// node daemon until the chief says training is over, then exits 0. A training task
// (worker or chief) starts its own daemon, places the variables on the ps tasks, and
// trains with the others (distributed_trainer.cpp). Without a cluster, nothing changes.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include <actorflow/actorflow.h>

#include "flags.h"

namespace kit {

struct ClusterTask {
  bool distributed = false;
  actorflow::net::ClusterSpec spec;
  std::string self;    // "/job:worker/task:1"
  std::string device;  // "/job:worker/task:1/cpu:0"
  // Among the training tasks (a chief job's task first, then the workers).
  int worker = 0;
  int num_workers = 1;
  bool is_chief = true;
  std::string chief;   // the chief's task name
  // The session target: this task first (nodes without a device run here), then the ps.
  std::string target;
  std::vector<actorflow::net::HostPort> ps;
  // The tasks that only serve (ps, and the other workers of in-graph replication): the
  // chief tells them to stop when training is over.
  std::vector<std::pair<std::string, actorflow::net::HostPort>> servers;
  // In-graph replication: every training task's device, this one (the client) first.
  bool in_graph = false;
  std::vector<std::string> tower_devices;
  actorflow::train::PsStrategy ps_strategy = actorflow::train::PsStrategy::round_robin;
  // --strategy allreduce: no ps; every training task holds the whole model in its own
  // session and all-reduces its gradients with the others (allreduce_trainer.h). The
  // training tasks' names and daemon addresses by rank (= worker), the chief's first.
  bool allreduce = false;
  std::vector<std::string> members;
  std::vector<actorflow::net::HostPort> member_daemons;
  std::unique_ptr<actorflow::net::NodeDaemon> daemon;

  // The variables of the model built while the returned scope lives go to the ps tasks
  // (replica_device_setter, --ps_strategy), the rest to this task. Null when local.
  std::unique_ptr<actorflow::DeviceScope> place(actorflow::Graph& g) const;
  // "worker 1 of 2" for messages.
  std::string describe() const;
};

// Resolves the cluster from the flags and the environment; checks the distributed flags.
// A ps task never returns: it serves until the chief's Shutdown (exit 0) or SIGTERM.
// Errors end the program with a message naming what is wrong (exit 2).
std::unique_ptr<ClusterTask> start_task(const Flags& f, const std::string& program);

}  // namespace kit
