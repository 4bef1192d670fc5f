#include <arpa/inet.h>

#include <iostream>

#include "actorflow/net/training_task.h"
#include "actorflow/runtime/scheduler_polling.h"

namespace actorflow::net {

namespace {

// Listen on the spec's address when it is a literal this host can bind (loopback in tests),
// else on every interface: a host name in the spec need not be one this host can bind.
std::string listen_host(const HostPort& hp) {
  unsigned char buf[16];
  if (inet_pton(AF_INET, hp.host.c_str(), buf) == 1 || inet_pton(AF_INET6, hp.host.c_str(), buf) == 1) return hp.host;
  return "0.0.0.0";
}

}  // namespace

std::unique_ptr<DeviceScope> TrainingTask::place(Graph& g) const {
  if (allreduce) return nullptr;
  return std::make_unique<DeviceScope>(g, train::replica_device_setter(static_cast<int>(ps.size()), device, ps_strategy));
}

std::string TrainingTask::describe() const {
  return self + " (worker " + std::to_string(worker) + " of " + std::to_string(num_workers) +
         (is_chief ? ", the chief)" : ")");
}

bool task_serves(const ClusterSpec& spec, const TrainingTaskOptions& options) {
  return spec.self().job == "ps" || (options.in_graph && !options.allreduce && !spec.is_chief());
}

Result<std::unique_ptr<NodeDaemon>> start_task_daemon(const ClusterSpec& spec, const TrainingTaskOptions& options) {
  // Cluster tasks share their machine's cores with each other (a ps and its workers on
  // one host, each worker with its own daemon): idle scheduler threads must not poll.
  if (Status s = runtime::set_scheduler_polling(runtime::SchedulerPolling::shared_cores()); !s.ok())
    std::cerr << s.to_string() << " (idle scheduler threads keep polling)" << std::endl;
  AF_ASSIGN_OR_RETURN(HostPort self, spec.self_address());
  DaemonOptions o;
  o.task = spec.self().to_string();
  o.host = listen_host(self);
  o.port = self.port;
  // Heartbeats: the task's daemon, its dials to the other daemons and its sessions' client
  // connections all beat every heartbeat_ms and give up on a peer silent peer_timeout_ms.
  o.heartbeat_ms = options.heartbeat_ms;
  o.idle_timeout_ms = options.peer_timeout_ms;
  o.trusted_network = options.trusted_network;
  set_client_heartbeat(options.heartbeat_ms, options.peer_timeout_ms);
  auto d = NodeDaemon::start(o);
  if (!d.ok() && d.status().code() == Code::not_found)
    return not_found(
        "no cluster token: every task of the cluster needs the same secret in ACTORFLOW_TOKEN, e.g.\n"
        "  export ACTORFLOW_TOKEN=$(head -c 32 /dev/urandom | base64)   # once, then the same on every host\n"
        "or ACTORFLOW_TOKEN_FILE=FILE naming a file that holds it");
  if (!d.ok())
    return Status(d.status().code(), spec.self().to_string() + " cannot start its node daemon on " + self.to_string() +
                                         ": " + d.status().to_string());
  return std::move(d).value();
}

Result<std::unique_ptr<TrainingTask>> start_training_task(const ClusterSpec& spec, const TrainingTaskOptions& options) {
  const std::string& job = spec.self().job;
  if (job == "evaluator") return invalid_argument("an evaluator task is not supported yet");
  if (task_serves(spec, options)) return invalid_argument(spec.self().to_string() + " serves; it does not train");
  if (options.allreduce && spec.num_tasks("ps") > 0) return invalid_argument("all-reduce training has no ps tasks");
  if (!options.allreduce && spec.num_tasks("ps") == 0)
    return invalid_argument("the cluster has no ps task to hold the variables");
  auto t = std::make_unique<TrainingTask>();
  t->spec = spec;
  t->self = spec.self().to_string();
  for (int i = 0; i < spec.num_tasks("ps"); ++i) {
    AF_ASSIGN_OR_RETURN(HostPort hp, spec.address({"ps", i}));
    t->ps.push_back(hp);
  }
  const int num_chief = spec.num_tasks("chief") + spec.num_tasks("master");
  t->num_workers = num_chief + spec.num_tasks("worker");
  t->is_chief = spec.is_chief();
  AF_ASSIGN_OR_RETURN(TaskName chief, spec.chief());
  t->chief = chief.to_string();
  t->worker = job == "worker" ? num_chief + spec.self().index : spec.self().index;
  t->device = t->self + "/cpu:0";
  t->ps_strategy = options.ps_strategy;
  t->in_graph = options.in_graph && !options.allreduce;
  AF_ASSIGN_OR_RETURN(t->daemon, start_task_daemon(spec, options));
  AF_ASSIGN_OR_RETURN(HostPort self, spec.self_address());
  if (options.allreduce) {
    // The whole graph runs in this process; the daemon serves the group's rendezvous
    // store (the chief's is the one used) and answers the others' liveness probes.
    t->allreduce = true;
    for (const char* j : {"chief", "master", "worker"})
      for (int i = 0; i < spec.num_tasks(j); ++i) {
        TaskName member{j, i};
        AF_ASSIGN_OR_RETURN(HostPort hp, spec.address(member));
        t->members.push_back(member.to_string());
        t->member_daemons.push_back(hp);
      }
    return t;
  }
  t->target = t->self + "=af://" + self.to_string();
  for (size_t i = 0; i < t->ps.size(); ++i) {
    std::string name = "/job:ps/task:" + std::to_string(i);
    t->target += "," + name + "=af://" + t->ps[i].to_string();
    t->servers.emplace_back(name, t->ps[i]);
  }
  if (t->in_graph) {
    t->tower_devices.push_back(t->device);
    for (const TaskName& other : spec.tasks()) {
      if (other.job == "ps" || other.job == "evaluator" || other == spec.self()) continue;
      AF_ASSIGN_OR_RETURN(HostPort hp, spec.address(other));
      t->target += "," + other.to_string() + "=af://" + hp.to_string();
      t->servers.emplace_back(other.to_string(), hp);
      t->tower_devices.push_back(other.to_string() + "/cpu:0");
    }
  }
  return t;
}

}  // namespace actorflow::net
