// Who is in the cluster and who this process is: jobs (chief, master, worker, ps,
// evaluator), each a list of task addresses, plus this task's job and index. One type
// for every launcher; cluster_sources.h fills it from flags, a JSON file, TF_CONFIG,
// Slurm or Open MPI.
#pragma once
#include "actorflow/api.h"
#include <compare>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "actorflow/status.h"

AF_PUBLIC_BEGIN

namespace actorflow::net {

// TensorFlow's port when an address names none.
inline constexpr uint16_t kDefaultPort = 2222;

// The jobs a cluster may hold, as TensorFlow and Kubeflow name them.
bool is_known_job(std::string_view job);
// "chief, master, worker, ps, evaluator", for messages.
const char* known_jobs_text();

// A task, written "/job:ps/task:1" as in TensorFlow device names.
struct TaskName {
  std::string job;
  int index = 0;

  std::string to_string() const;
  // "/job:ps/task:1" or TF's long form "/job:ps/replica:0/task:1".
  static Result<TaskName> parse(std::string_view name);

  friend bool operator==(const TaskName&, const TaskName&) = default;
  friend auto operator<=>(const TaskName&, const TaskName&) = default;
};

struct HostPort {
  std::string host;  // a name, an IPv4 address, or an IPv6 address without brackets
  uint16_t port = kDefaultPort;

  // "host:port", or "[v6]:port".
  std::string to_string() const;
  // "host", "host:port", "[v6]" or "[v6]:port"; without a port, `default_port`. The error
  // quotes the text; callers add where it came from.
  static Result<HostPort> parse(std::string_view text, uint16_t default_port = kDefaultPort);

  friend bool operator==(const HostPort&, const HostPort&) = default;
};

// Where a spec came from, so that make()'s errors name the variable and fields a user
// wrote: {"TF_CONFIG", "task.type", "task.index"}, {"flags", "--job_name", "--task_index"}.
struct SpecOrigin {
  std::string source;
  std::string job_field = "task.type";
  std::string index_field = "task.index";
};

class ClusterSpec {
 public:
  using Jobs = std::map<std::string, std::vector<HostPort>>;

  ClusterSpec() = default;
  // Checks that every job is known, that no two tasks share an address, and that `self`
  // is a task of the cluster. Jobs without tasks are dropped. An evaluator may stand
  // outside the cluster: Kubeflow's TFJob leaves it out of "cluster" on purpose, since it
  // only reads checkpoints.
  static Result<ClusterSpec> make(Jobs jobs, TaskName self, const SpecOrigin& origin);

  const Jobs& jobs() const { return jobs_; }
  const TaskName& self() const { return self_; }
  int num_tasks(std::string_view job) const;
  // Every task of the cluster, by job name then index.
  std::vector<TaskName> tasks() const;
  // not_found for a task the cluster does not hold.
  Result<HostPort> address(const TaskName& task) const;
  Result<HostPort> self_address() const { return address(self_); }

  // The task that initializes variables and writes checkpoints: chief 0, else master 0,
  // else worker 0 (TensorFlow's rule). failed_precondition when there is none.
  Result<TaskName> chief() const;
  bool is_chief() const;

  // The TF_CONFIG form, {"cluster": {...}, "task": {"type": ..., "index": ...}}, which
  // parse_tf_config reads back: what a launcher hands to its children.
  std::string to_tf_config() const;

 private:
  Jobs jobs_;
  TaskName self_;
};

}  // namespace actorflow::net

AF_PUBLIC_END
