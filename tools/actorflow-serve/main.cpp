// actorflow-serve: serves models exported by `--mode export` (<base_path>/<N>/) with
// TensorFlow Serving's gRPC API (--port, default 8500) and REST API (--rest_api_port,
// default 8501).
//
//   build/tools/actorflow-serve --model_name cancer --model_base_path ./model/cancer_classifier/dnn
//   build/tools/actorflow-serve --model_config_file models.config   # several models, version policies
//   curl -d '{"instances": [[...30 features...]]}' localhost:8501/v1/models/cancer:predict
//
// Prints "GRPC_LISTENING host:port" and then "LISTENING host:port" (the REST port) once it
// accepts connections (with port 0, the port the OS chose; --grpc_port_file and
// --port_file also write them, the gRPC one first). Loads the versions each model's
// policy wants, polls for newer ones and swaps without failing a request; SIGTERM or
// SIGINT answers the requests in flight and exits 0.
#include <CLI/CLI.hpp>

#include <actorflow/library_threads.h>
#include <actorflow/net/port_file.h>
#include <actorflow/runtime/scheduler_polling.h>

#include <malloc.h>

#include <csignal>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>

#include "batcher.h"
#include "http_server.h"
#include "metrics.h"
#include "model_registry.h"
#include "rest_api.h"
#include "warmup.h"
#if AF_SERVE_GRPC
#include "proto/grpc_server.h"
#include "proto/model_config.h"
#endif

namespace {

void log_line(const std::string& line) {
  std::fprintf(stderr, "[actorflow-serve] %s\n", line.c_str());
  std::fflush(stderr);
}

// The token file's first line, without surrounding blanks.
bool read_token(const std::string& path, std::string* token) {
  std::ifstream in(path);
  if (!in || !std::getline(in, *token)) return false;
  auto b = token->find_first_not_of(" \t\r\n"), e = token->find_last_not_of(" \t\r\n");
  *token = b == std::string::npos ? "" : token->substr(b, e - b + 1);
  return !token->empty();
}

int fail(const std::string& message) {
  std::cerr << "actorflow-serve: " << message << "\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"actorflow-serve: TensorFlow Serving's gRPC and REST APIs for models exported by the ActorFlow samples"};
  serve::ManagerOptions mo;
  serve::HttpOptions ho;
  serve::BatchOptions bo;
  serve::WarmupOptions wo;
  int grpc_port = 8500;
  std::string port_file, grpc_port_file, token_file, config_file;
  app.add_option("--model_name", mo.model_name, "the name clients use: /v1/models/NAME, ModelSpec.name");
  app.add_option("--model_base_path", mo.base_path, "folder of numbered versions written by --mode export")->check(CLI::ExistingDirectory);
  app.add_option("--model_config_file", config_file,
                 "several models: TF Serving's ModelServerConfig in text format (model_config_list { config { name base_path "
                 "model_version_policy version_labels } }); instead of --model_name and --model_base_path")
      ->check(CLI::ExistingFile);
  app.add_option("--host", ho.host, "address to listen on (gRPC and REST)")->capture_default_str();
  app.add_option("--port", grpc_port, "gRPC port; 0 = any free port")->check(CLI::Range(0, 65535))->capture_default_str();
  app.add_option("--rest_api_port", ho.port, "REST (HTTP) port; 0 = any free port")->check(CLI::Range(0, 65535))->capture_default_str();
  app.add_option("--port_file", port_file, "write the REST port listened on to this file");
  app.add_option("--grpc_port_file", grpc_port_file, "write the gRPC port listened on to this file (before --port_file)");
  app.add_option("--file_system_poll_wait_seconds", mo.poll_seconds, "how often to look for new versions; 0 = only at start")
      ->check(CLI::NonNegativeNumber)->capture_default_str();
  app.add_option("--max_body_bytes", ho.max_body_bytes, "larger request bodies get 413 (REST) or RESOURCE_EXHAUSTED (gRPC)")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 30))->capture_default_str();
  app.add_flag("--enable_batching", bo.enabled, "merge predict requests that arrive together into one step");
  app.add_option("--max_batch_size", bo.max_batch_size, "most rows in a merged step")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--batch_timeout_micros", bo.batch_timeout_micros, "how long a request waits for others to join it (0: none; the requests that arrive while a step runs form the next batch)")
      ->check(CLI::NonNegativeNumber)->capture_default_str();
  app.add_option("--num_batch_threads", bo.threads, "threads running merged predict steps (with --enable_batching; without it a request's step runs on its HTTP thread)")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--max_enqueued_batches", bo.max_enqueued_batches,
                 "with --enable_batching: the batch queue holds at most this many batches of --max_batch_size rows; "
                 "a request that does not fit gets 429")
      ->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--max_in_flight_requests", ho.max_in_flight_requests,
                 "requests read, queued or running at once; more get 429 before their body is read (gRPC: Predict calls, "
                 "RESOURCE_EXHAUSTED)")
      ->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--max_in_flight_bytes", ho.max_in_flight_bytes,
                 "body bytes (as the headers announce them) of the requests in flight; more get 429 before their body is read "
                 "(gRPC: the memory its buffers may take)")
      ->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--num_io_threads", ho.io_threads, "threads serving HTTP")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--auth_token_file", token_file, "ask every request for 'Authorization: Bearer <the file's token>' (gRPC: the metadata 'authorization')")
      ->check(CLI::ExistingFile);
  app.add_option("--access_log", ho.access_log, "one line per request on stdout (true|false)")->capture_default_str();
  app.add_option("--read_timeout_ms", ho.read_timeout_ms, "a request must arrive whole within this")
      ->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--drain_timeout_ms", ho.drain_timeout_ms, "how long SIGTERM waits for requests in flight")
      ->check(CLI::NonNegativeNumber)->capture_default_str();
  app.add_option("--warmup_requests", wo.requests,
                 "predicts each version runs before it is made available, when it has no assets.extra/tf_serving_warmup_requests; 0 = none")
      ->check(CLI::NonNegativeNumber)->capture_default_str();
  bool polling = false;
  app.add_flag("--scheduler_polling", polling,
               "idle actor-scheduler threads poll for work between steps (by default they wait: the HTTP threads "
               "need the cores between steps)");
  CLI11_PARSE(app, argc, argv);
  // Between steps the cores belong to the HTTP threads parsing the next requests; polling
  // scheduler threads took them (wrk -c64 on 2 cores, batched: 8,300-10,500 req/s polling
  // against 11,900-12,900 waiting, and a p99 of 5.9-7.2 ms against 4.2-4.6 at half load;
  // smaller since serial steps run on the caller's thread, but waiting still ahead).
  (void)actorflow::runtime::set_scheduler_polling(polling ? actorflow::runtime::SchedulerPolling::standalone()
                                                          : actorflow::runtime::SchedulerPolling::shared_cores());

  // Which models: one from the flags, or those of the config file.
  std::vector<serve::ManagerOptions> configs;
  if (!config_file.empty()) {
    if (!mo.model_name.empty() || !mo.base_path.empty()) return fail("give --model_config_file or --model_name/--model_base_path, not both");
#if AF_SERVE_GRPC
    auto read = serve::read_model_config_file(config_file, mo);
    if (!read.ok()) return fail(read.status().message());
    configs = std::move(*read);
#else
    return fail("--model_config_file needs protobuf, and this build has none (install libprotobuf-dev and rebuild)");
#endif
  } else {
    if (mo.model_name.empty() || mo.base_path.empty()) return fail("give --model_name and --model_base_path, or --model_config_file");
    // The name goes into URLs and a Prometheus label: keep it to characters both take as they are.
    if (mo.model_name.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-") != std::string::npos)
      return fail("--model_name may hold letters, digits, '_', '.' and '-' only");
    configs.push_back(mo);
  }
  // --port was the REST port before the gRPC API came; a command line written then
  // (--port 8501) now asks for both APIs on one port. Say so rather than fail to bind.
  if (grpc_port != 0 && grpc_port == ho.port)
    return fail("--port (gRPC) and --rest_api_port (REST) are both " + std::to_string(grpc_port) +
                "; as in TF Serving, --port is the gRPC port: give REST its own with --rest_api_port");
  if (!token_file.empty() && !read_token(token_file, &ho.auth_token)) return fail("--auth_token_file " + token_file + " holds no token");
  std::signal(SIGPIPE, SIG_IGN);
  // A request's body and buffers over 1 MiB are mapped and go back to the kernel when the
  // request ends. glibc's default threshold rises to the largest block freed (up to 32
  // MiB), and then keeps such blocks in its arenas: 10,000 fuzzed requests of up to 4 MiB
  // left the server 38 MiB larger with it, 20 MiB with this.
  mallopt(M_MMAP_THRESHOLD, 1 << 20);
  // Every thread of the server runs under SCHED_BATCH, inheriting it from this one before
  // any is started: the library's own (actorflow/library_threads.h), gRPC's, the HTTP
  // threads and the batch workers. A request is handed from thread to thread, and a woken
  // thread under it does not preempt the one that woke it, which goes on to read the
  // requests ready after it. At saturation on 2 cores: gRPC 36,600-37,900 calls/s against
  // 31,000-31,700 with only the library's threads under it, REST 2-4% more. AF_SCHED_BATCH=0
  // leaves the default.
  actorflow::batch_policy_on_this_thread();

  serve::Metrics metrics;
  std::vector<std::unique_ptr<serve::ModelManager>> managers;
  for (auto& c : configs) {
    c.before_available = [wo, bo](const serve::LoadedModel& m) { return serve::warm_up(m, wo, bo, log_line); };
    log_line("model '" + c.model_name + "' from " + c.base_path + ", versions: " + c.policy.to_string());
    managers.push_back(std::make_unique<serve::ModelManager>(c, log_line));
  }
  auto models = std::make_unique<serve::ModelRegistry>(std::move(managers));
  models->poll_once();
  for (auto& m : models->all())
    if (!m->current()) log_line("no version of '" + m->name() + "' loaded yet under " + m->options().base_path + "; answering 503");
  models->start_polling();
  auto batcher = std::make_unique<serve::Batcher>(bo, metrics);

#if AF_SERVE_GRPC
  serve::GrpcOptions go;
  go.host = ho.host;
  go.port = grpc_port;
  go.auth_token = ho.auth_token;
  go.max_message_bytes = static_cast<int>(ho.max_body_bytes);
  go.max_in_flight_requests = ho.max_in_flight_requests;
  go.max_in_flight_bytes = ho.max_in_flight_bytes;
  auto grpc = std::make_unique<serve::GrpcServer>(go, *models, *batcher, metrics, log_line);
  if (auto s = grpc->start(); !s.ok()) return fail(s.message());
  if (!grpc_port_file.empty())
    if (auto s = actorflow::net::write_port_file(grpc_port_file, grpc->port()); !s.ok()) return fail(s.message());
  std::cout << "GRPC_LISTENING " << ho.host << ":" << grpc->port() << std::endl;
#else
  (void)grpc_port;
  if (!grpc_port_file.empty()) return fail("--grpc_port_file: this build has no gRPC API (install libgrpc++-dev and rebuild)");
  log_line("this build has no gRPC API (libgrpc++-dev was missing): --port is not served");
#endif

  serve::RestApi api(*models, *batcher, metrics);
  auto server = std::make_unique<serve::HttpServer>(ho, api, metrics);
  if (auto s = server->listen(); !s.ok()) return fail(s.to_string());
  int port = server->port();
  if (!port_file.empty())
    if (auto s = actorflow::net::write_port_file(port_file, port); !s.ok()) return fail(s.message());
  std::cout << "LISTENING " << ho.host << ":" << port << std::endl;

  int64_t left = server->run();
#if AF_SERVE_GRPC
  // The HTTP side has drained; gRPC calls in flight get what is left of the drain time.
  grpc->shutdown(std::chrono::milliseconds(ho.drain_timeout_ms));
  grpc.reset();
#endif
  models->stop();
  // The batcher answers what it still holds before the server's connections go away.
  batcher.reset();
  server.reset();
  models.reset();
  if (left > 0) {
    log_line("drain timed out with " + std::to_string(left) + " requests in flight");
    return 1;
  }
  log_line("drained; exiting");
  return 0;
}
