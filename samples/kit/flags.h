// The command-line flags every training sample shares (the seeds' set, spelled the same:
// --epoch_number 10 or --epoch_number=10; switches as --enable_bn, --enable_bn=false or
// --noenable_bn, as TF1's tf.app.flags booleans).
#pragma once
#include <cstdint>
#include <set>
#include <string>
#include <vector>

namespace kit {

struct Flags {
  double learning_rate = 0.01;
  int epoch_number = 10;
  int batch_size = 64;
  std::string optimizer = "sgd";  // sgd|momentum|adagrad|adadelta|adam|ftrl|rmsprop
  std::string model = "mlp";
  std::string model_network = "128 32 8";
  bool enable_bn = false;
  bool enable_dropout = false;
  double dropout_keep_prob = 0.5;
  bool enable_lr_decay = false;
  double lr_decay_rate = 0.96;
  int steps_to_validate = 100;
  std::string checkpoint_path = "./checkpoint";
  std::string output_path = "./tensorboard";
  std::string mode = "train";  // train|train_from_scratch|export|inference
  std::string saved_model_path = "./model";
  int model_version = 1;
  std::string inference_test_file;
  std::string inference_format = "auto";  // auto (from the file's content)|csv|idx
  std::string inference_result_file = "./inference_result.txt";
  int64_t seed = 1;
  int threads = 0;  // 0 = all cores
  std::string data_dir;      // where the sample's data lives (a default per sample)
  int64_t max_steps = -1;    // stop early (tests and quick runs)
  bool shuffle = true;       // false: every epoch in the data's order (reproducible runs)
  std::string device = "cpu";  // cpu|gpu: gpu places the model on /gpu:0 (device.h)
  // float32|bfloat16: bfloat16 builds the model under ComputeTypeScope (graph.h);
  // fashion_mnist only.
  std::string compute_type = "float32";

  // Distributed training (cluster.h). The cluster comes from the seeds' flags, a
  // --cluster_spec file, TF_CONFIG, Slurm or Open MPI (net/README.md).
  std::string ps_hosts, worker_hosts, chief_hosts, job_name, task_index = "0", cluster_spec;
  int num_ps = 0;              // Slurm / Open MPI: the first ranks that are ps tasks
  int base_port = 2222;        // Slurm / Open MPI: port of a node's first task
  std::string mpi_hosts;       // Open MPI: the hosts
  std::string strategy = "ps";       // ps|allreduce: parameter servers, or replicas that all-reduce gradients
  int64_t allreduce_bucket_bytes = 25 << 20;  // allreduce: gradients per all-reduce (0: one each); DDP's 25 MB
  std::string allreduce_algorithm = "auto";    // allreduce: auto|ring|bcube
  std::string trace_path;  // one process or allreduce: a Chrome trace of its kernels
  std::string sync_mode = "async";  // async|sync|ssp
  int replicas_to_aggregate = 0;    // sync: gradients per round (0: workers - backup_workers)
  int backup_workers = 0;           // sync: workers beyond those a round waits for
  int staleness = 2;                // ssp: how many clocks ahead of the slowest a worker may run
  std::string replication = "between_graph";  // between_graph|in_graph
  std::string ps_strategy = "round_robin";    // round_robin|greedy_by_bytes
  int64_t sync_timeout_ms = 60000;     // a round / clock wait gives up (and says so) after this
  int64_t startup_timeout_ms = 120000; // how long a task waits for the others to come up
  int64_t step_timeout_ms = 60000;     // a step across the cluster fails (and is retried) after this
  std::string clock_log;               // ssp: the chief writes the ps's clock records here
  int64_t slow_step_ms = 0;            // a test hook: sleep this long before every step
  int64_t hash_bucket_size = 0;        // wide_and_deep: hashed sparse features in a table this big (0: none)
  double save_checkpoint_secs = 600;   // the chief also checkpoints this often (bounds what a lost ps costs)
  int64_t save_checkpoint_steps = 0;   // distributed: the chief checkpoints every N global steps (0: every epoch)
  int heartbeat_ms = 1000;             // every connection beats this often when idle
  int peer_timeout_ms = 10000;         // a peer silent this long is dead (a cut link, a hung host)
  bool trusted_network = false;        // the task's daemon may listen beyond loopback without TLS

  // The flags the command line named ("--model", ...), for samples that reject a flag
  // only where it does not apply.
  std::set<std::string> given;

  // Layer widths parsed from model_network: "128 32 8", "128,32,8" and "128, 32" all
  // give {128, 32, 8}. parse_flags has checked it.
  std::vector<int> network() const;
};

// "128 32" or "128,32" -> {128, 32}; an error message (empty on success) for anything
// that is not a list of positive widths.
std::vector<int> parse_network(const std::string& text, std::string* error);

// What one sample accepts beyond the common set.
struct FlagSpec {
  std::string program;
  std::vector<std::string> models;  // --model must name one of these
  bool hash_buckets = false;        // takes --hash_bucket_size
};

// The common defaults with the checkpoint, summary and export paths under the sample's
// name (./checkpoint/<sample>, ./tensorboard/<sample>, ./model/<sample>).
Flags sample_defaults(const std::string& sample);

// Default checkpoint/summary/export paths get the model name appended, so models of one
// sample do not resume from each other's checkpoints.
void per_model_paths(Flags& f, const Flags& defaults);

// The outcome of parsing: `exit_code` < 0 means go on with `flags`; otherwise the program
// ends with that code after printing `message` (help on stdout, an error on stderr).
struct ParsedFlags {
  Flags flags;
  int exit_code = -1;
  std::string message;
};
ParsedFlags try_parse_flags(int argc, const char* const* argv, const FlagSpec& spec, const Flags& defaults);

// Parses argv; on --help or a bad flag prints the message and exits (0 or 2).
Flags parse_flags(int argc, char** argv, const FlagSpec& spec, const Flags& defaults);

// Ends the program with a clear error when the command line named any of `flags`, which
// do not apply `where` (e.g. "to --model lr"): a flag is honoured or refused, never
// silently ignored.
void reject_flags(const Flags& f, const std::vector<std::string>& flags, const std::string& where);
// The same check as a message: empty when none of `flags` was given.
std::string unsupported_flags(const Flags& f, const std::vector<std::string>& flags, const std::string& where);

// For the small samples without the training flags: accepts --help and the named string
// options only, so a training flag passed to them is an error rather than ignored.
struct StringFlag {
  std::string name;  // "--logdir"
  std::string* value;
  std::string help;
};
void parse_simple_flags(int argc, char** argv, const std::string& program, const std::vector<StringFlag>& flags);

}  // namespace kit
