// A CollectiveGroup (actorflow/collective.h) on Gloo, the library PyTorch's DDP uses on
// CPU: Gloo's own TCP pairs carry the all-reduce; the rendezvous (each member's Gloo
// address) goes through a store served by one daemon of the cluster (the chief's), over
// the members' authenticated connections to it. No shared file system.
//
// A group is made once per process and formed (connected) before its first op; when an op
// fails (a member lost, a timeout) every later op fails at once until form() is called
// again: rank 0 then publishes a new generation in the store and the others, waiting for a
// generation they have not used, join it.
#pragma once
#include "actorflow/api.h"
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "actorflow/collective.h"
#include "actorflow/net/cluster_spec.h"

AF_PUBLIC_BEGIN

namespace actorflow::net {

// How an all-reduce moves its data; every member of a group must use the same one. Both
// send 2 (n - 1) / n of the buffer per member; they differ in how many dependent rounds
// of transfers that takes.
enum class AllReduceAlgorithm {
  // ring at 2 members, bcube beyond.
  automatic,
  // Gloo's ring: 2 (n - 1) rounds, each in segments that overlap the transfers with the
  // sums.
  ring,
  // Gloo's bcube: recursive halving, then doubling, over the factors of n (2 log2 n rounds
  // when n is a power of 2; one direct exchange with all n - 1 others when n is prime).
  bcube,
};

// What `a` means in a group of `members`: automatic resolved (ring at 2, bcube beyond).
AllReduceAlgorithm resolve_allreduce_algorithm(AllReduceAlgorithm a, int members);

// "auto", "ring" or "bcube" (as the flags spell them); nullopt for anything else.
std::optional<AllReduceAlgorithm> parse_allreduce_algorithm(const std::string& name);
const char* allreduce_algorithm_name(AllReduceAlgorithm a);

struct GlooGroupOptions {
  int rank = 0;
  int size = 1;
  // The daemon serving the store (the chief's), and the namespace of this group's keys
  // there (a job's name: groups of other jobs on that daemon never meet).
  HostPort store;
  std::string space = "allreduce";
  // The cluster token; empty: the environment's (ACTORFLOW_TOKEN or ACTORFLOW_TOKEN_FILE),
  // as every task reads it.
  std::string token;
  // Every member's task name and daemon address, by rank: errors name the member lost
  // (its daemon no longer accepts connections).
  std::vector<std::string> member_names;
  std::vector<HostPort> member_daemons;
  // The address Gloo's TCP pairs listen on (this task's host).
  std::string listen_host = "127.0.0.1";
  // An op not finished after this long fails (and the group with it); also the longest a
  // bucket waits for the one before it.
  int64_t timeout_ms = 60000;
  AllReduceAlgorithm algorithm = AllReduceAlgorithm::automatic;
};

class GlooGroup : public CollectiveGroup {
 public:
  using Clock = std::chrono::steady_clock;
  static Result<std::shared_ptr<GlooGroup>> create(GlooGroupOptions options);
  // (Re)forms the group by `deadline`: rank 0 publishes a new generation, the others wait
  // for one they have not joined yet and that is not formed without them; every member
  // waits (to `deadline`) until all have arrived, then Gloo connects every pair within
  // `timeout_ms`. Ops started before this returns fail.
  virtual Status form(Clock::time_point deadline) = 0;
  // The generation last formed ("" before the first).
  virtual std::string generation() const = 0;
  // Bytes this process's all-reduce and broadcast sent on Gloo's pairs, as the
  // algorithms count them (each segment once).
  virtual uint64_t bytes_sent() const = 0;
};

// TCP bytes this process's open sockets have had acknowledged by their peers and have
// received (the kernel's tcp_info, summed over /proc/self/fd): what actually crossed the
// wire, whoever sent it.
struct TcpBytes {
  uint64_t acked = 0;
  uint64_t received = 0;
};
TcpBytes process_tcp_bytes();

}  // namespace actorflow::net

AF_PUBLIC_END
