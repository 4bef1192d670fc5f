// actorflow-node: the node daemon. Clients run graphs on it with
// Session::create(g, "af://host:port"); every connection proves it knows the cluster token.
//
//   ACTORFLOW_TOKEN=s3cret build/tools/actorflow-node --host 127.0.0.1 --port 2222
//
// Prints "LISTENING host:port" once it accepts connections (with --port 0, the port the
// OS chose; --port_file also writes it to a file). SIGTERM or SIGINT drains the steps in
// flight, closes the connections and exits 0.
#include <actorflow/net/daemon.h>

#include <CLI/CLI.hpp>

#include <csignal>
#include <cstdio>
#include <fstream>
#include <iostream>

namespace afn = actorflow::net;

int main(int argc, char** argv) {
  CLI::App app{"actorflow-node: runs the graphs that ActorFlow clients register (af://host:port)"};
  afn::DaemonOptions opts;
  std::string host;
  int port = 2222;
  std::string port_file;
  std::string job_name = "worker";
  int task_index = 0;
  app.add_option("--host", host, "address to listen on (default 0.0.0.0; 127.0.0.1 with --insecure)");
  app.add_option("--port", port, "port to listen on; 0 = any free port")->check(CLI::Range(0, 65535))->capture_default_str();
  app.add_option("--port_file", port_file, "write the port listened on to this file");
  app.add_option("--job_name", job_name, "this task's job, for log lines and errors")->capture_default_str();
  app.add_option("--task_index", task_index, "this task's index in its job")->check(CLI::NonNegativeNumber)->capture_default_str();
  app.add_option("--token_file", opts.token_file, "file holding the cluster token (else ACTORFLOW_TOKEN, ACTORFLOW_TOKEN_FILE)");
  app.add_flag("--insecure", opts.insecure, "no cluster token; listen on loopback only (tests on one machine)");
  app.add_option("--max_message_bytes", opts.max_message_bytes, "largest frame accepted from an authenticated peer")
      ->capture_default_str();
  app.add_option("--worker_threads", opts.worker_threads, "threads running steps")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--drain_timeout_ms", opts.drain_timeout_ms, "how long SIGTERM waits for steps in flight")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  opts.host = !host.empty() ? host : (opts.insecure ? "127.0.0.1" : "0.0.0.0");
  opts.port = static_cast<uint16_t>(port);
  opts.task = "/job:" + job_name + "/task:" + std::to_string(task_index);

  // Block the stop signals in every thread; this one waits for them below.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  auto daemon = afn::NodeDaemon::start(opts);
  if (!daemon.ok()) {
    std::cerr << "actorflow-node: " << daemon.status().to_string() << "\n";
    return 2;
  }
  if (!port_file.empty()) {
    // Written whole, then renamed: a reader never sees a half-written port.
    std::string tmp = port_file + ".tmp";
    std::ofstream(tmp) << (*daemon)->port() << "\n";
    if (std::rename(tmp.c_str(), port_file.c_str()) != 0) {
      std::cerr << "actorflow-node: cannot write --port_file " << port_file << "\n";
      return 2;
    }
  }
  std::cout << "LISTENING " << (*daemon)->address() << std::endl;

  int sig = 0;
  sigwait(&stop_signals, &sig);
  std::cerr << "[actorflow-node " << opts.task << "] " << (sig == SIGTERM ? "SIGTERM" : "SIGINT")
            << ": draining steps and closing connections" << std::endl;
  (*daemon)->stop();
  (*daemon)->join();
  return 0;
}
