// actorflow-node: the node daemon. Clients run graphs on it with
// Session::create(g, "af://host:port"); every connection proves it knows the cluster token.
//
//   ACTORFLOW_TOKEN=$(head -c 32 /dev/urandom | base64) build/tools/actorflow-node --host 127.0.0.1 --port 2222
//
// Its task comes from the cluster (--ps_hosts/--worker_hosts/--job_name/--task_index,
// --cluster_spec, TF_CONFIG, Slurm or Open MPI: net/README.md), else /job:worker/task:0.
// Prints "LISTENING host:port" once it accepts connections (with --port 0, the port the
// OS chose; --port_file also writes it to a file). SIGTERM or SIGINT drains the steps in
// flight, closes the connections and exits 0.
#include <actorflow/net/cluster_sources.h>
#include <actorflow/net/daemon.h>
#include <actorflow/net/port_file.h>
#include <actorflow/runtime/scheduler_polling.h>

#include <CLI/CLI.hpp>

#include <csignal>
#include <cstdio>
#include <iostream>

namespace afn = actorflow::net;

int main(int argc, char** argv) {
  CLI::App app{"actorflow-node: runs the graphs that ActorFlow clients register (af://host:port)"};
  afn::DaemonOptions opts;
  std::string host;
  int port = 2222;
  std::string port_file;
  afn::ClusterOptions cluster;
  app.add_option("--host", host,
                 "address to listen on (default 0.0.0.0 with TLS or --trusted_network, else 127.0.0.1)");
  app.add_option("--port", port, "port to listen on; 0 = any free port (default: this task's port in the cluster, else 2222)")
      ->check(CLI::Range(0, 65535));
  app.add_option("--port_file", port_file, "write the port listened on to this file");
  // Who this task is: the first cluster source present (cluster_sources.h) names it; without
  // one, --job_name/--task_index alone (default /job:worker/task:0).
  app.add_option("--ps_hosts", cluster.flags.ps_hosts, "the cluster's ps tasks, host:port,...");
  app.add_option("--worker_hosts", cluster.flags.worker_hosts, "the cluster's worker tasks, host:port,...");
  app.add_option("--chief_hosts", cluster.flags.chief_hosts, "the cluster's chief task, host:port");
  app.add_option("--job_name", cluster.flags.job_name, "this task's job (ps, worker, chief, ...)");
  app.add_option("--task_index", cluster.flags.task_index, "this task's index in its job")->capture_default_str();
  app.add_option("--cluster_spec", cluster.cluster_spec_file, "the cluster as TF's JSON (or the TF_CONFIG form)");
  app.add_option("--base_port", cluster.launcher.base_port, "Slurm / Open MPI: port of a node's first task")->capture_default_str();
  app.add_option("--num_ps", cluster.launcher.num_ps, "Slurm / Open MPI: how many of the first ranks are ps tasks")->capture_default_str();
  app.add_option("--mpi_hosts", cluster.launcher.mpi_hosts, "Open MPI: the hosts, e.g. n[1-4]");
  app.add_option("--token_file", opts.token_file, "file holding the cluster token (else ACTORFLOW_TOKEN, ACTORFLOW_TOKEN_FILE)");
  app.add_option("--tls_cert", opts.tls_cert, "TLS: this daemon's certificate (PEM; else ACTORFLOW_TLS_CERT)");
  app.add_option("--tls_key", opts.tls_key, "TLS: its private key (PEM; else ACTORFLOW_TLS_KEY)");
  app.add_option("--tls_ca", opts.tls_ca, "TLS: the cluster's CA, which must have signed every peer's certificate (else ACTORFLOW_TLS_CA)");
  app.add_flag("--insecure", opts.insecure, "no cluster token; listen on loopback only (tests on one machine)");
  app.add_flag("--trusted_network", opts.trusted_network,
               "listen beyond loopback without TLS: only the handshake is then authenticated, so use it on a "
               "network no one else can reach");
  app.add_option("--max_message_bytes", opts.max_message_bytes, "largest frame accepted from an authenticated peer")
      ->capture_default_str();
  app.add_option("--worker_threads", opts.worker_threads, "threads running whole-graph steps, registrations and releases (partition steps each have a waiting thread of their own)")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--spin_us", opts.spin_us,
                 "after answering a step from the io thread, poll for the client's next frame this many "
                 "microseconds before sleeping (-1: AF_NET_SPIN_US, else 50; 0: never)")
      ->capture_default_str();
  app.add_option("--drain_timeout_ms", opts.drain_timeout_ms, "how long SIGTERM waits for steps in flight")
      ->capture_default_str();
  // Heartbeats (docs/ARCHITECTURE.md, "Failure model"): every connection, accepted or
  // dialed to a peer daemon, beats every --heartbeat_ms when idle; a peer silent for
  // --peer_timeout_ms is taken as dead (its connection closes, its graphs are freed, the
  // steps waiting on it fail). Give every process of a cluster the same two values.
  app.add_option("--heartbeat_ms", opts.heartbeat_ms, "send a heartbeat to an idle peer this often")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--peer_timeout_ms,--idle_timeout_ms", opts.idle_timeout_ms,
                 "a peer (client or daemon) silent this long is dead: drop it and free its graphs (>= 2 x --heartbeat_ms)")
      ->capture_default_str();
  bool polling = false;
  app.add_flag("--scheduler_polling", polling,
               "idle scheduler threads poll for work (lower latency when this daemon has the cores to itself; "
               "by default they wait, as a daemon shares its host with clients and other daemons)");
  CLI11_PARSE(app, argc, argv);
  // Measured with two daemons and a client on 2 cores: polling threads halved the wire
  // throughput of 4 MiB edges (runtime/scheduler_polling.h).
  (void)actorflow::runtime::set_scheduler_polling(polling ? actorflow::runtime::SchedulerPolling::standalone()
                                                          : actorflow::runtime::SchedulerPolling::shared_cores());

  auto spec = afn::resolve_cluster(cluster);
  if (spec.ok()) {
    opts.task = spec->self().to_string();
    auto self = spec->self_address();
    // Listen on every interface at our port: the spec's name for this host need not be
    // one it can bind.
    if (self.ok() && app.count("--port") == 0) port = self->port;
  } else if (spec.status().code() == actorflow::Code::not_found) {
    std::string job = cluster.flags.job_name.empty() ? "worker" : cluster.flags.job_name;
    auto task = afn::TaskName::parse("/job:" + job + "/task:" + cluster.flags.task_index);
    if (!task.ok()) {
      std::cerr << "actorflow-node: --job_name/--task_index: " << task.status().to_string() << "\n";
      return 2;
    }
    opts.task = task->to_string();
  } else {
    std::cerr << "actorflow-node: " << spec.status().to_string() << "\n";
    return 2;
  }
  opts.host = host;
  opts.port = static_cast<uint16_t>(port);

  // The connections this process dials (to peer daemons) beat and time out alike.
  afn::set_client_heartbeat(opts.heartbeat_ms, opts.idle_timeout_ms);

  // Block the stop signals in every thread; wait_until_stopped waits for them below.
  afn::block_stop_signals();

  auto daemon = afn::NodeDaemon::start(opts);
  if (!daemon.ok()) {
    std::cerr << "actorflow-node: " << daemon.status().to_string() << "\n";
    return 2;
  }
  if (!port_file.empty()) {
    if (auto s = afn::write_port_file(port_file, (*daemon)->port()); !s.ok()) {
      std::cerr << "actorflow-node: " << s.message() << "\n";
      return 2;
    }
  }
  std::cout << "LISTENING " << (*daemon)->address() << std::endl;

  int sig = afn::wait_until_stopped(**daemon);
  if (sig != 0)
    std::cerr << "[actorflow-node " << opts.task << "] " << (sig == SIGTERM ? "SIGTERM" : "SIGINT")
              << ": drained steps and closed connections" << std::endl;
  return 0;
}
