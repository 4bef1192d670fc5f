// What a daemon does with the partitions of graphs cut over several daemons (TF's
// GraphMgr for partitions): each RegisterGraph that names a location becomes a
// PartitionExecutor whose _Send/_Recv nodes exchange Edge and Credit frames with the
// other daemons of that client session through the PeerTable; RunStep runs it with the
// client's step id, which every partition of the step shares.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "actorflow/runtime/partition_executor.h"
#include "frame_messages.h"
#include "peer_table.h"

namespace actorflow::net {

// Where an Edge or Credit frame came from: the accepted connection `owner` (0 for none),
// or the peer daemon at `peer_address` ("" for none).
struct EdgeSource {
  uint64_t owner = 0;
  std::string peer_address;
};

class PartitionService {
 public:
  // `where` names this daemon in errors; `peers` outlives the service.
  PartitionService(std::string where, PeerTable& peers);
  ~PartitionService();

  // Registers one partition for connection `owner`, after dialing the peers this daemon
  // must dial (the lower address dials) by `deadline`.
  Result<uint64_t> register_partition(const RegisterGraphMsg& m, uint64_t owner,
                                      DaemonClient::Clock::time_point deadline);
  // Runs one step; blocks (a worker thread). Errors name this daemon and the location.
  StepDoneMsg run_step(const RunStepMsg& m, uint64_t owner);
  // The same in two halves: start_step on the io thread, in the order the connection
  // delivered the steps (every partition must start its steps in one order, see
  // partition_executor.h), then finish_step on a worker thread.
  struct Started;
  std::shared_ptr<Started> start_step(const RunStepMsg& m, uint64_t owner);
  StepDoneMsg finish_step(Started& s);
  // True when the started step has ended already (it ran to its end on the thread that
  // started it, or could not start): finish_step returns at once, so that thread answers.
  static bool ended(const Started& s);
  // Aborts step `step` of partition `handle` (never blocks: the io thread calls it).
  void abort_step(uint64_t handle, uint64_t step, const Status& why, uint64_t owner);
  // False when the owner has no such partition.
  bool close_graph(uint64_t handle, uint64_t owner);
  // End the steps in flight of partition `handle`, or of all connection `owner`'s
  // partitions (never block: the io thread calls them on CloseGraph and when the
  // connection closes, before close_graph or close_owner frees the partitions on a worker
  // thread, which may be the very one such a step holds).
  void abort_graph(uint64_t handle, uint64_t owner, const Status& why);
  void abort_owner(uint64_t owner, const Status& why = client_gone());
  // The connection to the peer daemon at `address` is lost: the partitions of the kinds
  // of step that span it can never get (or give) its edges again, so they end their
  // steps now and fail the later ones with `why` (unavailable: the client registers them
  // afresh). Without this, a partition waiting for an edge that the lost peer had not
  // yet written would wait for its deadline, while the peer's own part had answered its
  // client already. Never blocks (io threads call it).
  void peer_lost(const std::string& address, const Status& why);
  static Status client_gone();
  static Status closed_by_client();
  size_t close_owner(uint64_t owner);
  // How many partitions are registered.
  size_t size();
  // An Edge or Credit frame from a peer daemon (any thread). A connection may feed only the
  // sessions it registered a partition of, or whose registration named it a peer:
  // failed_precondition otherwise (the frame is dropped; the caller closes the connection).
  // A frame for a session with no partition here (closed, or not registered yet) is
  // dropped, as no one waits for it.
  Status deliver(const Message& m, const EdgeSource& from);
  // The same, for a session's locations on this daemon.
  void deliver_edge(uint64_t session, const std::string& to, int64_t step, int64_t edge, runtime::EdgeValue value);
  void deliver_credit(uint64_t session, const std::string& to, int64_t edge);

 private:
  struct Entry;
  // The rendezvous for (session, location), if `from` may feed it (null `from`: this daemon).
  Result<std::shared_ptr<runtime::EdgeRendezvous>> route(uint64_t session, const std::string& location,
                                                         const EdgeSource* from);
  void abort_where(const std::function<bool(uint64_t handle, const Entry&)>& pick, const Status& why);

  std::string where_;
  PeerTable& peers_;
  std::mutex mu_;
  std::map<uint64_t, std::shared_ptr<Entry>> entries_;
  // (session, location) -> its partition, for the Edge and Credit frames of that session.
  std::map<std::pair<uint64_t, std::string>, std::weak_ptr<Entry>> routes_;
  // (variable scope, location) -> the variables its partitions share: a session's own
  // scope lives as long as its partitions do.
  std::map<std::pair<uint64_t, std::string>, std::weak_ptr<ResourceMgr>> variables_;
  // A named container's (SessionOptions::shared_container) variables and coordination
  // state (sync accumulators and rounds, worker clocks and end-of-training marks) live as
  // long as the daemon, as a TF server's containers do: workers that all lost their
  // connections at once (a hung ps, a cut link) find the model where they left it, not a
  // checkpoint behind, and a chief restarted after the workers ended and left still sees
  // their marks. (A sync round cut mid-way needs no reset: the chief's next take restarts
  // the accumulator at its round, and a take of the failed step gives way to it.)
  // Keyed by (container name, location).
  std::map<std::pair<std::string, std::string>, std::shared_ptr<ResourceMgr>> containers_;
  uint64_t next_handle_ = 1;
};

}  // namespace actorflow::net
