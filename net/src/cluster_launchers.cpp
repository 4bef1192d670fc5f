// Clusters from batch launchers (Slurm, Open MPI): every task runs the same command and
// learns its rank from the environment. Ranks fill nodes in order, as both launchers do by
// default; the environment's own view of this task (local rank, node name) is checked
// against that layout, since another distribution would give two tasks one address.
#include "actorflow/net/cluster_sources.h"
#include "actorflow/net/hostlist.h"
#include "parse_util.h"

namespace actorflow::net {
namespace {

using detail::quote;

struct Slot {
  std::string host;
  int local_rank = 0;
};

const std::string* lookup(const Environment& env, const char* name) {
  auto it = env.find(name);
  return it == env.end() ? nullptr : &it->second;
}

Result<int> int_var(const Environment& env, const char* name, int lo) {
  const std::string* v = lookup(env, name);
  if (!v) return invalid_argument(std::string(name) + " is not set");
  auto i = detail::parse_int(*v, lo, 1 << 30);
  if (!i) return invalid_argument(std::string(name) + ": " + quote(*v) + " is not an integer of at least " + std::to_string(lo));
  return static_cast<int>(*i);
}

std::vector<Slot> block_layout(const std::vector<std::string>& nodes, const std::vector<int>& counts) {
  std::vector<Slot> slots;
  for (size_t n = 0; n < nodes.size(); ++n)
    for (int k = 0; k < counts[n]; ++k) slots.push_back({nodes[n], k});
  return slots;
}

// Checks a launcher's local rank variable against the layout, when it is set.
Status check_local_rank(const Environment& env, const char* name, const std::vector<Slot>& slots, int rank,
                        const char* hint) {
  if (!lookup(env, name)) return Status::OK();
  AF_ASSIGN_OR_RETURN(int local, int_var(env, name, 0));
  const Slot& s = slots[static_cast<size_t>(rank)];
  if (local != s.local_rank)
    return invalid_argument(std::string(name) + ": " + std::to_string(local) + " disagrees with the layout, which puts rank " +
                            std::to_string(rank) + " at local rank " + std::to_string(s.local_rank) + " on " + s.host + " (" +
                            hint + ")");
  return Status::OK();
}

// Rank r < num_ps is /job:ps/task:r, the others /job:worker/task:(r - num_ps).
Result<ClusterSpec> split_ranks(const std::vector<Slot>& slots, int rank, const LauncherOptions& options,
                                const std::string& size_var, const std::string& launcher) {
  const int size = static_cast<int>(slots.size());
  if (options.num_ps < 0) return invalid_argument(launcher + ": num_ps " + std::to_string(options.num_ps) + " is negative");
  if (options.num_ps >= size)
    return invalid_argument(launcher + ": num_ps " + std::to_string(options.num_ps) + " leaves no worker among the " +
                            std::to_string(size) + " tasks of " + size_var);
  ClusterSpec::Jobs jobs;
  for (int r = 0; r < size; ++r) {
    const Slot& s = slots[static_cast<size_t>(r)];
    const int port = options.base_port + s.local_rank;
    if (port > 65535)
      return invalid_argument(launcher + ": base_port " + std::to_string(options.base_port) + " plus local rank " +
                              std::to_string(s.local_rank) + " on " + s.host + " exceeds port 65535");
    jobs[r < options.num_ps ? "ps" : "worker"].push_back({s.host, static_cast<uint16_t>(port)});
  }
  TaskName self = rank < options.num_ps ? TaskName{"ps", rank} : TaskName{"worker", rank - options.num_ps};
  return ClusterSpec::make(std::move(jobs), std::move(self), {launcher, "num_ps", "rank"});
}

}  // namespace

Result<ClusterSpec> cluster_from_slurm(const Environment& env, const LauncherOptions& options) {
  AF_ASSIGN_OR_RETURN(int rank, int_var(env, "SLURM_PROCID", 0));
  AF_ASSIGN_OR_RETURN(int ntasks, int_var(env, "SLURM_NTASKS", 1));
  if (rank >= ntasks)
    return invalid_argument("SLURM_PROCID: " + std::to_string(rank) + " is out of range for SLURM_NTASKS " + std::to_string(ntasks));

  // A step may run on fewer nodes than its job holds, so its own list comes first.
  const bool step = lookup(env, "SLURM_STEP_NODELIST") != nullptr;
  const char* nodes_var = step ? "SLURM_STEP_NODELIST" : lookup(env, "SLURM_JOB_NODELIST") ? "SLURM_JOB_NODELIST" : "SLURM_NODELIST";
  const std::string* node_list = lookup(env, nodes_var);
  if (!node_list) return invalid_argument("SLURM_JOB_NODELIST is not set");
  auto nodes = expand_hostlist(*node_list);
  if (!nodes.ok()) return invalid_argument(std::string(nodes_var) + ": " + nodes.status().message());

  const char* counts_var = step && lookup(env, "SLURM_STEP_TASKS_PER_NODE") ? "SLURM_STEP_TASKS_PER_NODE" : "SLURM_TASKS_PER_NODE";
  std::vector<int> counts;
  if (const std::string* per_node = lookup(env, counts_var)) {
    auto c = expand_tasks_per_node(*per_node);
    if (!c.ok()) return invalid_argument(std::string(counts_var) + ": " + c.status().message());
    counts = std::move(*c);
    if (counts.size() != nodes->size())
      return invalid_argument(std::string(counts_var) + ": " + quote(*per_node) + " counts " + std::to_string(counts.size()) +
                              " nodes, " + nodes_var + " has " + std::to_string(nodes->size()));
    long long sum = 0;
    for (int c2 : counts) sum += c2;
    if (sum != ntasks)
      return invalid_argument(std::string(counts_var) + ": " + quote(*per_node) + " counts " + std::to_string(sum) +
                              " tasks, SLURM_NTASKS is " + std::to_string(ntasks));
  } else {
    if (ntasks % static_cast<int>(nodes->size()) != 0)
      return invalid_argument("SLURM_NTASKS: " + std::to_string(ntasks) + " does not split evenly over the " +
                              std::to_string(nodes->size()) + " nodes of " + nodes_var + ", and " + counts_var + " is not set");
    counts.assign(nodes->size(), ntasks / static_cast<int>(nodes->size()));
  }

  std::vector<Slot> slots = block_layout(*nodes, counts);
  AF_RETURN_IF_ERROR(check_local_rank(env, "SLURM_LOCALID", slots, rank, "launch with srun --distribution=block"));
  if (const std::string* node = lookup(env, "SLURMD_NODENAME"); node && *node != slots[static_cast<size_t>(rank)].host)
    return invalid_argument("SLURMD_NODENAME: " + quote(*node) + " disagrees with the layout, which puts rank " +
                            std::to_string(rank) + " on " + slots[static_cast<size_t>(rank)].host +
                            " (launch with srun --distribution=block)");
  return split_ranks(slots, rank, options, "SLURM_NTASKS", "Slurm");
}

Result<ClusterSpec> cluster_from_mpi(const Environment& env, const LauncherOptions& options) {
  AF_ASSIGN_OR_RETURN(int rank, int_var(env, "OMPI_COMM_WORLD_RANK", 0));
  AF_ASSIGN_OR_RETURN(int size, int_var(env, "OMPI_COMM_WORLD_SIZE", 1));
  if (rank >= size)
    return invalid_argument("OMPI_COMM_WORLD_RANK: " + std::to_string(rank) + " is out of range for OMPI_COMM_WORLD_SIZE " +
                            std::to_string(size));
  if (options.mpi_hosts.empty())
    return invalid_argument("Open MPI: --mpi_hosts is empty: list the hosts, one per rank or one per node");
  auto hosts = expand_hostlist(options.mpi_hosts);
  if (!hosts.ok()) return invalid_argument("--mpi_hosts: " + hosts.status().message());

  std::vector<Slot> slots;
  if (static_cast<int>(hosts->size()) == size) {
    // One entry per rank: a host named again holds the next local rank.
    std::map<std::string, int> seen;
    for (const std::string& h : *hosts) slots.push_back({h, seen[h]++});
  } else if (size % static_cast<int>(hosts->size()) == 0) {
    slots = block_layout(*hosts, std::vector<int>(hosts->size(), size / static_cast<int>(hosts->size())));
  } else {
    return invalid_argument("--mpi_hosts: " + quote(options.mpi_hosts) + " names " + std::to_string(hosts->size()) +
                            " hosts, which fits neither one per rank nor an even split of OMPI_COMM_WORLD_SIZE " +
                            std::to_string(size));
  }
  AF_RETURN_IF_ERROR(check_local_rank(env, "OMPI_COMM_WORLD_LOCAL_RANK", slots, rank,
                                      "list --mpi_hosts one per rank in rank order, or map ranks --map-by slot"));
  return split_ranks(slots, rank, options, "OMPI_COMM_WORLD_SIZE", "Open MPI");
}

}  // namespace actorflow::net
