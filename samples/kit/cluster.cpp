#include "cluster.h"

#include <arpa/inet.h>

#include <chrono>
#include <csignal>
#include <cstdio>
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

bool is_loopback_host(const std::string& host) {
  if (host == "localhost") return true;
  unsigned char buf[16];
  if (inet_pton(AF_INET, host.c_str(), buf) == 1) return buf[0] == 127;
  static const unsigned char v6_loopback[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  return inet_pton(AF_INET6, host.c_str(), buf) == 1 && std::memcmp(buf, v6_loopback, 16) == 0;
}

afn::TrainingTaskOptions task_options(const Flags& f) {
  afn::TrainingTaskOptions o;
  o.allreduce = f.strategy == "allreduce";
  o.in_graph = f.replication == "in_graph";
  if (f.ps_strategy == "greedy_by_bytes") o.ps_strategy = af::train::PsStrategy::greedy_by_bytes;
  o.heartbeat_ms = f.heartbeat_ms;
  o.peer_timeout_ms = f.peer_timeout_ms;
  o.trusted_network = f.trusted_network;
  return o;
}

// A ps task (or an in-graph worker that is not the chief) is its daemon: it holds its
// share of the variables until the chief says training is over.
[[noreturn]] void serve(const afn::ClusterSpec& spec, const afn::TrainingTaskOptions& options, const std::string& program) {
  afn::block_stop_signals();
  auto d = afn::start_task_daemon(spec, options);
  if (!d.ok()) fail(program, d.status().message());
  std::cout << "LISTENING " << (*d)->address() << std::endl;
  auto t0 = std::chrono::steady_clock::now();
  int sig = afn::wait_until_stopped(**d);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const std::string self = spec.self().to_string();
  std::printf("RESULT sample=%s role=%s task=%s stopped_by=%s seconds=%.1f\n", program.c_str(), spec.self().job.c_str(),
              self.c_str(), sig == 0 ? "chief" : (sig == SIGTERM ? "SIGTERM" : "SIGINT"), secs);
  std::fflush(stdout);
  std::exit(0);
}

}  // namespace

std::unique_ptr<af::DeviceScope> ClusterTask::place(af::Graph& g) const {
  return training ? training->place(g) : nullptr;
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
  const std::vector<std::string> cluster_only = {"--strategy", "--allreduce_bucket_bytes", "--allreduce_algorithm", "--sync_mode", "--replicas_to_aggregate", "--backup_workers", "--staleness",
                                                 "--replication", "--ps_strategy", "--sync_timeout_ms", "--step_timeout_ms", "--clock_log",
                                                 "--heartbeat_ms", "--peer_timeout_ms", "--trusted_network"};
  if (!spec.ok()) {
    if (spec.status().code() != af::Code::not_found) fail(program, spec.status().to_string());
    std::string unused = unsupported_flags(f, cluster_only, "without a cluster (--ps_hosts/--worker_hosts, TF_CONFIG, ...)");
    if (!unused.empty()) fail(program, unused);
    return t;
  }
  t->distributed = true;
  const std::string& job = spec->self().job;
  if (job == "evaluator") fail(program, "an evaluator task is not supported yet: run inference from the chief's checkpoints");
  const afn::TrainingTaskOptions options = task_options(f);
  if (options.allreduce) {
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
  for (const char* only : {"--allreduce_bucket_bytes", "--allreduce_algorithm"})
    if (!options.allreduce && f.given.count(only)) fail(program, std::string(only) + " applies to --strategy allreduce only");
  if (!options.allreduce && f.given.count("--trace_path"))
    fail(program, "--trace_path applies to one process or to --strategy allreduce, not to a ps cluster");
  if (f.mode == "export" || f.mode == "inference")
    fail(program, "--mode " + f.mode + " runs on one process: drop the cluster flags");

  if (afn::task_serves(*spec, options)) serve(*spec, options, program);

  const int num_workers = spec->num_tasks("chief") + spec->num_tasks("master") + spec->num_tasks("worker");
  if (f.sync_mode == "sync") {
    int r = f.replicas_to_aggregate > 0 ? f.replicas_to_aggregate : num_workers - f.backup_workers;
    if (r < 1 || r + f.backup_workers > num_workers)
      fail(program, "--replicas_to_aggregate " + std::to_string(r) + " with --backup_workers " + std::to_string(f.backup_workers) +
                        " does not fit " + std::to_string(num_workers) + " workers");
  }
  if (options.in_graph && f.sync_mode != "async")
    fail(program, "--replication in_graph averages the towers' gradients in one step; --sync_mode does not apply to it");
  auto training = afn::start_training_task(*spec, options);
  if (!training.ok()) fail(program, training.status().message());
  t->training = std::move(*training);
  return t;
}

}  // namespace kit
