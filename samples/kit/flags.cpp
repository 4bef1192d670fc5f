#include "flags.h"

#include <CLI/CLI.hpp>

#include <cstdlib>
#include <iostream>
#include <sstream>

namespace kit {

std::vector<int> parse_network(const std::string& text, std::string* error) {
  std::vector<int> widths;
  error->clear();
  std::string token;
  std::istringstream in(text);
  // Commas and spaces both separate: the seeds wrote "128 32 8", shell users write "128,32".
  while (in >> token) {
    std::istringstream parts(token);
    std::string part;
    while (std::getline(parts, part, ',')) {
      if (part.empty()) continue;
      char* end = nullptr;
      long w = std::strtol(part.c_str(), &end, 10);
      if (*end != '\0' || w <= 0 || w > (1L << 24)) {
        *error = "'" + part + "' in \"" + text + "\" is not a positive layer width (want e.g. \"128 32 8\" or \"128,32,8\")";
        return {};
      }
      widths.push_back(static_cast<int>(w));
    }
  }
  return widths;
}

std::vector<int> Flags::network() const {
  std::string error;
  return parse_network(model_network, &error);
}

Flags sample_defaults(const std::string& sample) {
  Flags f;
  f.checkpoint_path += "/" + sample;
  f.output_path += "/" + sample;
  f.saved_model_path += "/" + sample;
  return f;
}

void per_model_paths(Flags& f, const Flags& defaults) {
  if (f.checkpoint_path == defaults.checkpoint_path) f.checkpoint_path += "/" + f.model;
  if (f.output_path == defaults.output_path) f.output_path += "/" + f.model;
  if (f.saved_model_path == defaults.saved_model_path) f.saved_model_path += "/" + f.model;
}

namespace {

std::string joined(const std::vector<std::string>& v, const char* sep) {
  std::string s;
  for (auto& x : v) s += (s.empty() ? "" : sep) + x;
  return s;
}

CLI::Validator one_of(const std::vector<std::string>& names, const std::string& what) {
  return CLI::Validator(
      [names, what](std::string& v) -> std::string {
        for (auto& n : names)
          if (n == v) return "";
        return "'" + v + "' is not " + what + "; choose one of: " + joined(names, ", ");
      },
      joined(names, "|"));
}

}  // namespace

ParsedFlags try_parse_flags(int argc, const char* const* argv, const FlagSpec& spec, const Flags& defaults) {
  ParsedFlags r;
  Flags& f = r.flags;
  f = defaults;
  CLI::App app{spec.program};
  app.add_option("--learning_rate", f.learning_rate, "learning rate")->capture_default_str();
  app.add_option("--epoch_number", f.epoch_number, "epochs to train")->capture_default_str();
  app.add_option("--batch_size", f.batch_size, "examples per step")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--optimizer", f.optimizer, "sgd|momentum|adagrad|adadelta|adam|ftrl|rmsprop")
      ->check(one_of({"sgd", "momentum", "adagrad", "adadelta", "adam", "ftrl", "rmsprop"}, "an optimizer"))
      ->capture_default_str();
  auto* model = app.add_option("--model", f.model, "model: " + joined(spec.models, "|"))->capture_default_str();
  if (!spec.models.empty()) model->check(one_of(spec.models, "a model of " + spec.program));
  if (spec.hash_buckets)
    app.add_option("--hash_bucket_size", f.hash_bucket_size,
                   "hash the sparse features into a table of this many rows, split over the ps tasks (0: one row per feature value)")
        ->capture_default_str()
        ->check(CLI::NonNegativeNumber);
  app.add_option("--model_network", f.model_network, "hidden layer widths, e.g. \"128 32 8\" or \"128,32,8\"")
      ->capture_default_str()
      ->check(CLI::Validator(
          [](std::string& v) {
            std::string error;
            auto widths = parse_network(v, &error);
            if (error.empty() && widths.empty()) error = "no layer widths in \"" + v + "\"";
            return error;
          },
          "WIDTHS"));
  // Switches, as TF1's boolean flags: --enable_bn, --enable_bn=false, --noenable_bn.
  app.add_flag("--enable_bn,!--noenable_bn", f.enable_bn, "batch normalization")->capture_default_str();
  app.add_flag("--enable_dropout,!--noenable_dropout", f.enable_dropout, "dropout")->capture_default_str();
  app.add_option("--dropout_keep_prob", f.dropout_keep_prob, "keep probability")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  app.add_flag("--enable_lr_decay,!--noenable_lr_decay", f.enable_lr_decay, "exponential learning-rate decay")
      ->capture_default_str();
  app.add_option("--lr_decay_rate", f.lr_decay_rate, "decay rate per epoch")->capture_default_str();
  app.add_option("--steps_to_validate", f.steps_to_validate, "validate every N steps")->capture_default_str();
  app.add_option("--checkpoint_path", f.checkpoint_path, "checkpoint directory")->capture_default_str();
  app.add_option("--output_path", f.output_path, "TensorBoard summaries directory")->capture_default_str();
  app.add_option("--mode", f.mode, "train|train_from_scratch|export|inference")
      ->check(one_of({"train", "train_from_scratch", "export", "inference"}, "a mode"))
      ->capture_default_str();
  app.add_option("--saved_model_path", f.saved_model_path, "exported model directory")->capture_default_str();
  app.add_option("--model_version", f.model_version, "exported model version")->capture_default_str();
  app.add_option("--inference_test_file", f.inference_test_file, "inputs for inference mode");
  app.add_option("--inference_format", f.inference_format,
                 "auto (IDX when the file starts with IDX's magic bytes, else CSV)|csv|idx")
      ->check(one_of({"auto", "csv", "idx"}, "an input format"))
      ->capture_default_str();
  app.add_option("--inference_result_file", f.inference_result_file, "predictions, one per line")->capture_default_str();
  app.add_option("--seed", f.seed, "random seed")->capture_default_str();
  app.add_option("--threads", f.threads, "CPU threads (0 = all cores)")->capture_default_str();
  app.add_option("--data_dir", f.data_dir, "data location")->capture_default_str();
  app.add_option("--max_steps", f.max_steps, "stop after this many steps (-1: no limit)")->capture_default_str();
  app.add_flag("--shuffle,!--noshuffle", f.shuffle, "shuffle the training data every epoch")->capture_default_str();
  app.add_option("--device", f.device, "cpu|gpu: gpu trains the model on /gpu:0 (ops without a GPU kernel stay on the CPU)")
      ->check(one_of({"cpu", "gpu"}, "a device"))
      ->capture_default_str();
  app.add_option("--compute_type", f.compute_type,
                 "float32|bfloat16: bfloat16 multiplies the operands of the model's convolutions and matrix products "
                 "in bfloat16 with float32 sums, on processors with AMX (elsewhere float32, the faster there); "
                 "variables and outputs stay float32")
      ->check(one_of({"float32", "bfloat16"}, "a compute type"))
      ->capture_default_str();
  // Distributed training: one process per task, as the seeds start them.
  app.add_option("--ps_hosts", f.ps_hosts, "the cluster's ps tasks, host:port,...");
  app.add_option("--worker_hosts", f.worker_hosts, "the cluster's worker tasks, host:port,... (worker 0 is the chief)");
  app.add_option("--chief_hosts", f.chief_hosts, "a separate chief task, host:port");
  app.add_option("--job_name", f.job_name, "this task's job: ps|worker|chief");
  app.add_option("--task_index", f.task_index, "this task's index in its job")->capture_default_str();
  app.add_option("--cluster_spec", f.cluster_spec, "the cluster as TF's JSON (or the TF_CONFIG form)");
  app.add_option("--num_ps", f.num_ps, "Slurm / Open MPI: how many of the first ranks are ps tasks")->capture_default_str();
  app.add_option("--base_port", f.base_port, "Slurm / Open MPI: port of a node's first task")
      ->capture_default_str()
      ->check(CLI::Range(1, 65535));
  app.add_option("--mpi_hosts", f.mpi_hosts, "Open MPI: the hosts, e.g. n[1-4]");
  app.add_option("--strategy", f.strategy,
                 "ps (parameter servers hold the variables) | allreduce (every worker a replica; gradients averaged "
                 "with Gloo's all-reduce, no ps tasks)")
      ->check(one_of({"ps", "allreduce"}, "a strategy"))
      ->capture_default_str();
  app.add_option("--allreduce_bucket_bytes", f.allreduce_bucket_bytes,
                 "allreduce: gradients are all-reduced in buckets of about this many bytes, each as soon as its "
                 "gradients exist (0: one all-reduce per gradient)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--allreduce_algorithm", f.allreduce_algorithm,
                 "allreduce: ring (2 (n - 1) rounds of transfers) | bcube (recursive halving and doubling: 2 log2 n "
                 "rounds when n is a power of 2) | auto (ring at 2 workers, bcube beyond); the same on every worker")
      ->check(one_of({"auto", "ring", "bcube"}, "an all-reduce algorithm"))
      ->capture_default_str();
  app.add_option("--trace_path", f.trace_path,
                 "one process, or --strategy allreduce: write a Chrome trace (chrome://tracing, Perfetto) of every "
                 "kernel it runs when training ends (an all-reduce worker i > 0: FILE.worker<i>, its buckets' "
                 "all-reduces beside the backward pass); with a few --max_steps");
  app.add_option("--sync_mode", f.sync_mode, "async|sync|ssp: how the workers' updates meet on the ps")
      ->check(one_of({"async", "sync", "ssp"}, "an update mode"))
      ->capture_default_str();
  app.add_option("--replicas_to_aggregate", f.replicas_to_aggregate,
                 "sync: gradients averaged per step (0: the workers minus --backup_workers)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--backup_workers", f.backup_workers, "sync: workers a step does not wait for")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--staleness", f.staleness, "ssp: clocks a worker may run ahead of the slowest")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--replication", f.replication, "between_graph (every worker its own graph) | in_graph (one client, a tower per worker)")
      ->check(one_of({"between_graph", "in_graph"}, "a replication"))
      ->capture_default_str();
  app.add_option("--ps_strategy", f.ps_strategy, "round_robin|greedy_by_bytes: how variables spread over the ps tasks")
      ->check(one_of({"round_robin", "greedy_by_bytes"}, "a placement strategy"))
      ->capture_default_str();
  app.add_option("--sync_timeout_ms", f.sync_timeout_ms, "how long a sync round or an ssp clock waits for slow workers")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--startup_timeout_ms", f.startup_timeout_ms, "how long a task waits for the others and for the chief's initialization")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--step_timeout_ms", f.step_timeout_ms,
                 "distributed: a step that has not finished after this long fails, and the task waits for the "
                 "cluster to recover and goes on (above --sync_timeout_ms)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--save_checkpoint_secs", f.save_checkpoint_secs,
                 "distributed: the chief checkpoints this often as well as every epoch (a lost ps costs at most this much)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--save_checkpoint_steps", f.save_checkpoint_steps,
                 "distributed: the chief checkpoints every this many global steps instead of every epoch (0: every "
                 "epoch; a model of large tables whose epochs are short checkpoints less often)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--heartbeat_ms", f.heartbeat_ms, "distributed: every connection sends a heartbeat this often when idle")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--peer_timeout_ms", f.peer_timeout_ms,
                 "distributed: a task or daemon silent this long (a cut link) is taken as lost (>= 2 x --heartbeat_ms)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_flag("--trusted_network", f.trusted_network,
               "distributed: the task's daemon may listen beyond loopback without TLS (a network no one else can reach; "
               "otherwise give it ACTORFLOW_TLS_CERT/KEY/CA)");
  app.add_option("--clock_log", f.clock_log, "ssp: the chief writes the ps's clock records (worker clock slowest) here");
  app.add_option("--slow_step_ms", f.slow_step_ms, "test hook: sleep this long before every training step")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    std::ostringstream out, err;
    // CLI11's own codes (105, 106, ...) collapse to 2, the usual code for a bad command line.
    r.exit_code = app.exit(e, out, err) == 0 ? 0 : 2;
    r.message = out.str() + err.str();
    return r;
  }
  for (const CLI::Option* o : app.get_options())
    if (o->count() > 0) f.given.insert(o->get_name());
  return r;
}

Flags parse_flags(int argc, char** argv, const FlagSpec& spec, const Flags& defaults) {
  ParsedFlags r = try_parse_flags(argc, argv, spec, defaults);
  if (r.exit_code >= 0) {
    (r.exit_code == 0 ? std::cout : std::cerr) << r.message << std::flush;
    std::exit(r.exit_code);
  }
  // Only fashion_mnist builds its model under a compute type so far.
  if (spec.program != "fashion_mnist") reject_flags(r.flags, {"--compute_type"}, "to " + spec.program);
  return r.flags;
}

std::string unsupported_flags(const Flags& f, const std::vector<std::string>& flags, const std::string& where) {
  std::vector<std::string> named;
  for (auto& name : flags)
    if (f.given.count(name)) named.push_back(name);
  if (named.empty()) return "";
  return joined(named, ", ") + (named.size() == 1 ? " does" : " do") + " not apply " + where;
}

void reject_flags(const Flags& f, const std::vector<std::string>& flags, const std::string& where) {
  std::string message = unsupported_flags(f, flags, where);
  if (message.empty()) return;
  std::cerr << message << "\n";
  std::exit(2);
}

void parse_simple_flags(int argc, char** argv, const std::string& program, const std::vector<StringFlag>& flags) {
  CLI::App app{program};
  for (auto& flag : flags) app.add_option(flag.name, *flag.value, flag.help)->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    std::exit(app.exit(e) == 0 ? 0 : 2);
  }
}

}  // namespace kit
