// This process as one task of a training cluster, started the way TF1's trainers start
// theirs, one process per task: the cluster comes from flags or the environment
// (cluster_sources.h: resolve_cluster), and its role from the spec and how the cluster
// trains.
//
//   auto spec = net::resolve_cluster(options);          // not_found: no cluster, train locally
//   if (net::task_serves(*spec, how)) {                 // a ps task (or an in-graph tower)
//     net::block_stop_signals();                        // before the daemon's threads start
//     auto daemon = net::start_task_daemon(*spec, how); // holds variables / runs towers
//     net::wait_until_stopped(**daemon);                // until the chief's Shutdown (0) or a signal
//   } else {
//     auto task = net::start_training_task(*spec, how); // this task's daemon, placement, peers
//     ... build the model under task->place(g), then train (training_loop.h) ...
//   }
#pragma once
#include "actorflow/api.h"
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "actorflow/distributed.h"
#include "actorflow/dsl.h"
#include "actorflow/net/cluster_spec.h"
#include "actorflow/net/daemon.h"

AF_PUBLIC_BEGIN

namespace actorflow::net {

// How the training tasks of a cluster share the model.
struct TrainingTaskOptions {
  // false: the variables live on the ps tasks (between-graph or in-graph replication);
  // true: no ps, every training task holds the whole model and all-reduces gradients.
  bool allreduce = false;
  // With ps tasks: the chief alone is a client and runs a tower on every other training
  // task (which then only serves, as a ps task does).
  bool in_graph = false;
  train::PsStrategy ps_strategy = train::PsStrategy::round_robin;
  // Every connection of the task's daemon and its sessions beats this often when idle,
  // and gives up on a peer silent for peer_timeout_ms (a cut link, a hung host).
  int heartbeat_ms = 1000;
  int peer_timeout_ms = 10000;
  // The daemon may listen beyond loopback without TLS.
  bool trusted_network = false;
};

// A training task (a chief or a worker) of a cluster, with its node daemon running.
struct TrainingTask {
  ClusterSpec spec;
  std::string self;    // "/job:worker/task:1"
  std::string device;  // "/job:worker/task:1/cpu:0"
  // Among the training tasks (a chief job's task first, then the workers).
  int worker = 0;
  int num_workers = 1;
  bool is_chief = true;
  std::string chief;  // the chief's task name
  // The session target: this task first (nodes without a device run here), then the ps.
  std::string target;
  std::vector<HostPort> ps;
  // The tasks that only serve (ps, and the other workers of in-graph replication): the
  // chief tells them to stop when training is over.
  std::vector<std::pair<std::string, HostPort>> servers;
  // In-graph replication: every training task's device, this one (the client) first.
  bool in_graph = false;
  std::vector<std::string> tower_devices;
  train::PsStrategy ps_strategy = train::PsStrategy::round_robin;
  // All-reduce: no ps; the training tasks' names and daemon addresses by rank (= worker),
  // the chief's first.
  bool allreduce = false;
  std::vector<std::string> members;
  std::vector<HostPort> member_daemons;
  std::unique_ptr<NodeDaemon> daemon;

  // The variables of the model built while the returned scope lives go to the ps tasks
  // (replica_device_setter with ps_strategy), the rest to this task. Null under all-reduce.
  std::unique_ptr<DeviceScope> place(Graph& g) const;
  // "/job:worker/task:1 (worker 1 of 2)", ", the chief)" for the chief; for messages.
  std::string describe() const;
};

// Whether this task of `spec` only serves (a ps task, or a worker that is not the chief
// under in-graph replication) rather than trains.
bool task_serves(const ClusterSpec& spec, const TrainingTaskOptions& options);

// This task's node daemon, listening on its address in `spec` (on every interface when
// that address is a host name this host need not be able to bind), with the options'
// heartbeats for it and for this process's client connections. Cluster tasks share their
// machines' cores, so this also stops idle scheduler threads from polling (a note on
// stderr when that cannot be set). not_found, with how to set one, when there is no
// cluster token (ACTORFLOW_TOKEN); unavailable when the address cannot be bound.
Result<std::unique_ptr<NodeDaemon>> start_task_daemon(const ClusterSpec& spec, const TrainingTaskOptions& options);

// A training task of `spec`: starts its daemon (start_task_daemon) and works out its
// rank, its peers and its session target. invalid_argument when the spec does not fit the
// options (a ps job under all-reduce, none without it, an evaluator, a serving task).
Result<std::unique_ptr<TrainingTask>> start_training_task(const ClusterSpec& spec, const TrainingTaskOptions& options);

}  // namespace actorflow::net

AF_PUBLIC_END
