#include "cluster.h"

#include <actorflow/runtime/scheduler_polling.h>

#include <arpa/inet.h>

#include <csignal>

#include <cstdlib>
#include <cstring>
#include <iostream>

namespace kit {

namespace af = actorflow;
namespace afn = actorflow::net;

namespace {

[[noreturn]] void fail(const std::string& program, const std::string& message, int code = 2) {
  std::cerr << program << ": " << message << std::endl;
  std::exit(code);
}

// Listen on the spec's address when it is a literal this host can bind (loopback in tests),
// else on every interface: a host name in the spec need not be one this host can bind.
std::string listen_host(const afn::HostPort& hp) {
  unsigned char buf[16];
  if (inet_pton(AF_INET, hp.host.c_str(), buf) == 1 || inet_pton(AF_INET6, hp.host.c_str(), buf) == 1) return hp.host;
  return "0.0.0.0";
}

std::unique_ptr<afn::NodeDaemon> start_daemon(const afn::ClusterSpec& spec, const Flags& f, const std::string& program) {
  auto self = spec.self_address();
  if (!self.ok()) fail(program, self.status().to_string());
  afn::DaemonOptions o;
  o.task = spec.self().to_string();
  o.host = listen_host(*self);
  o.port = self->port;
  // Heartbeats: the task's daemon, its dials to the other daemons and its sessions' client
  // connections all beat every --heartbeat_ms and give up on a peer silent --peer_timeout_ms.
  o.heartbeat_ms = f.heartbeat_ms;
  o.idle_timeout_ms = f.peer_timeout_ms;
  o.trusted_network = f.trusted_network;
  afn::set_client_heartbeat(f.heartbeat_ms, f.peer_timeout_ms);
  auto d = afn::NodeDaemon::start(o);
  if (!d.ok() && d.status().code() == af::Code::not_found)
    fail(program, "no cluster token: every task of the cluster needs the same secret in ACTORFLOW_TOKEN, e.g.\n"
                  "  export ACTORFLOW_TOKEN=$(head -c 32 /dev/urandom | base64)   # once, then the same on every host\n"
                  "or ACTORFLOW_TOKEN_FILE=FILE naming a file that holds it");
  if (!d.ok()) fail(program, spec.self().to_string() + " cannot start its node daemon on " + self->to_string() + ": " + d.status().to_string());
  return std::move(d).value();
}

bool is_loopback_host(const std::string& host) {
  if (host == "localhost") return true;
  unsigned char buf[16];
  if (inet_pton(AF_INET, host.c_str(), buf) == 1) return buf[0] == 127;
  static const unsigned char v6_loopback[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  return inet_pton(AF_INET6, host.c_str(), buf) == 1 && std::memcmp(buf, v6_loopback, 16) == 0;
}

}  // namespace

std::unique_ptr<af::DeviceScope> ClusterTask::place(af::Graph& g) const {
  if (!distributed || allreduce) return nullptr;
  return std::make_unique<af::DeviceScope>(g, af::train::replica_device_setter(static_cast<int>(ps.size()), device, ps_strategy));
}

std::string ClusterTask::describe() const {
  return self + " (worker " + std::to_string(worker) + " of " + std::to_string(num_workers) + (is_chief ? ", the chief)" : ")");
}

std::unique_ptr<ClusterTask> start_task(const Flags& f, const std::string& program) {
  auto t = std::make_unique<ClusterTask>();
  afn::ClusterOptions co;
  co.flags.ps_hosts = f.ps_hosts;
  co.flags.worker_hosts = f.worker_hosts;
  co.flags.chief_hosts = f.chief_hosts;
  co.flags.job_name = f.job_name;
  co.flags.task_index = f.task_index;
  co.cluster_spec_file = f.cluster_spec;
  co.launcher.base_port = static_cast<uint16_t>(f.base_port);
  co.launcher.num_ps = f.num_ps;
  co.launcher.mpi_hosts = f.mpi_hosts;
  auto spec = afn::resolve_cluster(co);
  const std::vector<std::string> cluster_only = {"--strategy", "--allreduce_bucket_bytes", "--trace_path", "--sync_mode", "--replicas_to_aggregate", "--backup_workers", "--staleness",
                                                 "--replication", "--ps_strategy", "--sync_timeout_ms", "--step_timeout_ms", "--clock_log",
                                                 "--heartbeat_ms", "--peer_timeout_ms", "--trusted_network"};
  if (!spec.ok()) {
    if (spec.status().code() != af::Code::not_found) fail(program, spec.status().to_string());
    std::string unused = unsupported_flags(f, cluster_only, "without a cluster (--ps_hosts/--worker_hosts, TF_CONFIG, ...)");
    if (!unused.empty()) fail(program, unused);
    return t;
  }
  t->distributed = true;
  // Cluster tasks share their machine's cores with each other (a ps and its workers on
  // one host, each worker with its own daemon): idle scheduler threads must not poll.
  if (af::Status s = af::runtime::set_scheduler_polling(af::runtime::SchedulerPolling::shared_cores()); !s.ok())
    std::cerr << program << ": " << s.to_string() << " (idle scheduler threads keep polling)" << std::endl;
  t->spec = *spec;
  t->self = spec->self().to_string();
  const std::string& job = spec->self().job;
  if (job == "evaluator") fail(program, "an evaluator task is not supported yet: run inference from the chief's checkpoints");
  const bool allreduce = f.strategy == "allreduce";
  if (allreduce) {
    if (spec->num_tasks("ps") > 0)
      fail(program, "--strategy allreduce has no ps tasks: every worker holds the model (drop --ps_hosts, or the ps job)");
    std::string unused = unsupported_flags(f, {"--sync_mode", "--replicas_to_aggregate", "--backup_workers", "--staleness",
                                                "--replication", "--ps_strategy", "--sync_timeout_ms", "--clock_log"},
                                           "to --strategy allreduce (synchronous by construction, no ps)");
    if (!unused.empty()) fail(program, unused);
    // Gloo's own pairs carry the gradients with neither authentication nor encryption
    // (as PyTorch DDP's): beyond loopback that is an explicit choice, TLS or not.
    if (auto self = spec->self_address(); self.ok() && !is_loopback_host(self->host) && !f.trusted_network)
      fail(program, "--strategy allreduce: Gloo's connections between the workers are neither authenticated nor "
                    "encrypted; beyond loopback (" + self->host + ") pass --trusted_network for a network no one "
                    "else can reach");
  } else if (spec->num_tasks("ps") == 0) {
    fail(program, "the cluster has no ps task: pass --ps_hosts (or a ps job in TF_CONFIG), or train with --strategy allreduce");
  }
  for (const char* only : {"--allreduce_bucket_bytes", "--trace_path"})
    if (!allreduce && f.given.count(only)) fail(program, std::string(only) + " applies to --strategy allreduce only");
  for (int i = 0; i < spec->num_tasks("ps"); ++i) t->ps.push_back(*spec->address({"ps", i}));
  if (f.mode == "export" || f.mode == "inference")
    fail(program, "--mode " + f.mode + " runs on one process: drop the cluster flags");

  const bool in_graph = f.replication == "in_graph";
  if (job == "ps" || (in_graph && !spec->is_chief())) {
    // A ps task is its daemon: it holds its share of the variables until the chief says
    // training is over.
    afn::block_stop_signals();
    auto d = start_daemon(*spec, f, program);
    std::cout << "LISTENING " << d->address() << std::endl;
    auto t0 = std::chrono::steady_clock::now();
    int sig = afn::wait_until_stopped(*d);
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("RESULT sample=%s role=%s task=%s stopped_by=%s seconds=%.1f\n", program.c_str(), job.c_str(), t->self.c_str(),
                sig == 0 ? "chief" : (sig == SIGTERM ? "SIGTERM" : "SIGINT"), secs);
    std::fflush(stdout);
    std::exit(0);
  }

  const int num_chief = spec->num_tasks("chief") + spec->num_tasks("master");
  t->num_workers = num_chief + spec->num_tasks("worker");
  t->is_chief = spec->is_chief();
  t->chief = spec->chief()->to_string();
  t->worker = job == "worker" ? num_chief + spec->self().index : spec->self().index;
  t->device = t->self + "/cpu:0";
  if (f.ps_strategy == "greedy_by_bytes") t->ps_strategy = af::train::PsStrategy::greedy_by_bytes;
  if (f.sync_mode == "sync") {
    int r = f.replicas_to_aggregate > 0 ? f.replicas_to_aggregate : t->num_workers - f.backup_workers;
    if (r < 1 || r + f.backup_workers > t->num_workers)
      fail(program, "--replicas_to_aggregate " + std::to_string(r) + " with --backup_workers " + std::to_string(f.backup_workers) +
                        " does not fit " + std::to_string(t->num_workers) + " workers");
  }
  if (in_graph && f.sync_mode != "async")
    fail(program, "--replication in_graph averages the towers' gradients in one step; --sync_mode does not apply to it");
  t->in_graph = in_graph;
  t->daemon = start_daemon(*spec, f, program);
  auto self = spec->self_address();
  if (allreduce) {
    // The whole graph runs in this process; the daemon serves the group's rendezvous
    // store (the chief's is the one used) and answers the others' liveness probes.
    t->allreduce = true;
    std::vector<afn::TaskName> training;
    for (const char* j : {"chief", "master", "worker"})
      for (int i = 0; i < spec->num_tasks(j); ++i) training.push_back({j, i});
    for (const afn::TaskName& member : training) {
      t->members.push_back(member.to_string());
      t->member_daemons.push_back(*spec->address(member));
    }
    return t;
  }
  t->target = t->self + "=af://" + self->to_string();
  for (size_t i = 0; i < t->ps.size(); ++i) {
    std::string name = "/job:ps/task:" + std::to_string(i);
    t->target += "," + name + "=af://" + t->ps[i].to_string();
    t->servers.emplace_back(name, t->ps[i]);
  }
  if (in_graph) {
    t->tower_devices.push_back(t->device);
    for (const afn::TaskName& other : spec->tasks()) {
      if (other.job == "ps" || other.job == "evaluator" || other == spec->self()) continue;
      auto hp = spec->address(other);
      t->target += "," + other.to_string() + "=af://" + hp->to_string();
      t->servers.emplace_back(other.to_string(), *hp);
      t->tower_devices.push_back(other.to_string() + "/cpu:0");
    }
  }
  return t;
}

}  // namespace kit
