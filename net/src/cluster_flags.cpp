// The seeds' flags (--ps_hosts --worker_hosts --job_name --task_index), the process
// environment, and resolve_cluster, which picks whichever source a launcher provided.
#include <unistd.h>

#include "actorflow/net/cluster_sources.h"
#include "parse_util.h"

extern char** environ;

namespace actorflow::net {

using detail::quote;

Environment current_environment() {
  Environment env;
  for (char** e = environ; e && *e; ++e) {
    std::string_view kv(*e);
    size_t eq = kv.find('=');
    if (eq != std::string_view::npos) env.emplace(std::string(kv.substr(0, eq)), std::string(kv.substr(eq + 1)));
  }
  return env;
}

namespace {

Status add_hosts(const std::string& flag, const std::string& job, std::string_view list, ClusterSpec::Jobs* jobs) {
  if (list.empty()) return Status::OK();
  std::vector<HostPort>& hosts = (*jobs)[job];
  for (std::string_view item : detail::split(list, ',')) {
    auto hp = HostPort::parse(item);
    if (!hp.ok())
      return invalid_argument("flags: " + flag + " entry " + std::to_string(hosts.size()) + " " + hp.status().message());
    hosts.push_back(*hp);
  }
  return Status::OK();
}

bool has_host_flags(const ClusterFlags& f) { return !f.ps_hosts.empty() || !f.worker_hosts.empty() || !f.chief_hosts.empty(); }

Result<int> parse_task_index(const std::string& text, const std::string& where) {
  auto index = detail::parse_int(text, 0, 1 << 30);
  if (!index) return invalid_argument(where + "--task_index " + quote(text) + " is not a task number");
  return static_cast<int>(*index);
}

}  // namespace

Result<ClusterSpec> parse_cluster_flags(const ClusterFlags& flags) {
  ClusterSpec::Jobs jobs;
  AF_RETURN_IF_ERROR(add_hosts("--ps_hosts", "ps", flags.ps_hosts, &jobs));
  AF_RETURN_IF_ERROR(add_hosts("--worker_hosts", "worker", flags.worker_hosts, &jobs));
  AF_RETURN_IF_ERROR(add_hosts("--chief_hosts", "chief", flags.chief_hosts, &jobs));
  AF_ASSIGN_OR_RETURN(int index, parse_task_index(flags.task_index, "flags: "));
  return ClusterSpec::make(std::move(jobs), TaskName{flags.job_name, index}, {"flags", "--job_name", "--task_index"});
}

Result<ClusterSpec> resolve_cluster(const ClusterOptions& options, const Environment& env) {
  const ClusterFlags& flags = options.flags;
  if (!options.cluster_spec_file.empty()) {
    std::optional<TaskName> task;
    if (!flags.job_name.empty()) {
      AF_ASSIGN_OR_RETURN(int index, parse_task_index(flags.task_index, "flags: "));
      task = TaskName{flags.job_name, index};
    }
    return read_cluster_spec_file(options.cluster_spec_file, task);
  }
  if (has_host_flags(flags)) return parse_cluster_flags(flags);
  if (auto it = env.find("TF_CONFIG"); it != env.end()) return parse_tf_config(it->second);
  if (env.count("SLURM_PROCID")) return cluster_from_slurm(env, options.launcher);
  if (env.count("OMPI_COMM_WORLD_RANK")) return cluster_from_mpi(env, options.launcher);
  return not_found(
      "no cluster given: pass --cluster_spec FILE or --ps_hosts/--worker_hosts with --job_name and --task_index, or "
      "run under a launcher that sets TF_CONFIG, SLURM_PROCID or OMPI_COMM_WORLD_RANK");
}

Result<ClusterSpec> resolve_cluster(const ClusterOptions& options) { return resolve_cluster(options, current_environment()); }

}  // namespace actorflow::net
