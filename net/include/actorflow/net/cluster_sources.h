// Where a ClusterSpec comes from. Each source is a function of its inputs (flag strings,
// JSON text, or the environment as a map), so tests need no real environment;
// resolve_cluster picks the source a launcher provided.
//
// Errors are invalid_argument and name the variable or flag, the field and the value:
//   TF_CONFIG: task.index 5 is out of range for job 'worker' (2 tasks)
#pragma once
#include "actorflow/api.h"
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "actorflow/net/cluster_spec.h"

AF_PUBLIC_BEGIN

namespace actorflow::net {

using Environment = std::map<std::string, std::string>;
// This process's environment.
Environment current_environment();

// The seeds' flags: --ps_hosts=a:2222,b:2222 --worker_hosts=... --chief_hosts=...
// --job_name=ps|worker|chief|... --task_index=N. Empty host lists are absent jobs.
struct ClusterFlags {
  std::string ps_hosts;
  std::string worker_hosts;
  std::string chief_hosts;
  std::string job_name;
  std::string task_index = "0";
};
Result<ClusterSpec> parse_cluster_flags(const ClusterFlags& flags);

// TF's cluster JSON, either {"ps": [...], "worker": [...]} or the TF_CONFIG form
// {"cluster": {...}, "task": {...}}. `task`, when given (from --job_name/--task_index),
// names this process and wins over the JSON's "task"; the plain form needs it. `source`
// names the text in errors.
Result<ClusterSpec> parse_cluster_json(std::string_view json, const std::string& source,
                                       const std::optional<TaskName>& task = std::nullopt);
// --cluster_spec FILE.json.
Result<ClusterSpec> read_cluster_spec_file(const std::string& path, const std::optional<TaskName>& task = std::nullopt);
// The TF_CONFIG variable as Kubeflow's TFJob sets it:
//   {"cluster":{"chief":["j-chief-0.ns.svc:2222"],"worker":[...],"ps":[...]},
//    "task":{"type":"worker","index":1}}
// Other members ("environment", "rpc_layer") are ignored, as TensorFlow does.
Result<ClusterSpec> parse_tf_config(std::string_view value);

// Batch launchers start N copies of one command; each copy learns its rank from the
// environment. Ranks fill nodes in order (Slurm's and Open MPI's default block
// distribution); a task's port is base_port plus its rank on its node, so tasks sharing a
// node do not collide. The first num_ps ranks are ps tasks, the others workers (worker 0
// is then the chief).
struct LauncherOptions {
  uint16_t base_port = kDefaultPort;
  int num_ps = 0;
  // Open MPI only: the hosts (a list in Slurm's compressed form, e.g. "n[1-4]"), one per
  // rank, or one per node when the ranks divide evenly among them.
  std::string mpi_hosts;
};
// SLURM_PROCID (rank), SLURM_NTASKS, and the nodes of the step (SLURM_STEP_NODELIST) or
// job (SLURM_JOB_NODELIST, then SLURM_NODELIST) in compressed form. Tasks per node come
// from SLURM_STEP_TASKS_PER_NODE or SLURM_TASKS_PER_NODE ("2(x3),1"), else SLURM_NTASKS
// split evenly. SLURM_LOCALID and SLURMD_NODENAME, when set, must agree with the block
// layout: a cyclic distribution would otherwise give two tasks one address.
Result<ClusterSpec> cluster_from_slurm(const Environment& env, const LauncherOptions& options);
// OMPI_COMM_WORLD_RANK and OMPI_COMM_WORLD_SIZE; OMPI_COMM_WORLD_LOCAL_RANK, when set,
// must agree with the layout; hosts from options.mpi_hosts.
Result<ClusterSpec> cluster_from_mpi(const Environment& env, const LauncherOptions& options);

// Every flag a node daemon takes to find its cluster.
struct ClusterOptions {
  ClusterFlags flags;
  std::string cluster_spec_file;  // --cluster_spec
  LauncherOptions launcher;
};
// The first source present wins: --cluster_spec, then host flags (--ps_hosts,
// --worker_hosts, --chief_hosts), then TF_CONFIG, Slurm (SLURM_PROCID), Open MPI
// (OMPI_COMM_WORLD_RANK). not_found when there is none.
Result<ClusterSpec> resolve_cluster(const ClusterOptions& options, const Environment& env);
Result<ClusterSpec> resolve_cluster(const ClusterOptions& options);

}  // namespace actorflow::net

AF_PUBLIC_END
