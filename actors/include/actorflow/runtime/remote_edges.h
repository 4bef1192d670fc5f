// The seam between the runtime and whatever carries graph edges between partitions (TF's
// Rendezvous, OneFlow's CommNet). Two halves:
//  - RemoteEdges, the transport: pushes an edge's tensor message to the location that
//    consumes it, and a credit back to the location that produces it. The transport
//    chooses the bytes: net/ writes the tensor's data straight from its buffer
//    (tensor_codec.h's split form); the in-process LoopbackEdges encodes and decodes.
//  - EdgeRendezvous, one per partition: where the transport delivers (on_edge, on_credit)
//    and where the _Send/_Recv kernels wait. A _Send holds one of edge_capacity credits
//    per edge while its tensor is unconsumed on the far side (OneFlow's registers), so a
//    fast producer cannot flood a slow host; the _Recv returns it when it takes the tensor.
// Nothing here blocks a thread: waiters are callbacks, run outside the lock.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "actorflow/kernel.h"
#include "actorflow/status.h"
#include "actorflow/tensor_codec.h"

namespace actorflow::runtime {

// One tensor (or a failed step's status) on one edge; the tensor is shared, not copied.
using EdgeValue = TensorMessage;

class RemoteEdges {
 public:
  virtual ~RemoteEdges() = default;
  // Delivers `value` of `edge` for `step` to the partition at `to_location`. An error
  // (no route, connection gone) fails the sending step. The transport may read the
  // tensor's buffer after returning (a zero-copy write), so the producer's kernel gives
  // up the tensor as it would to a local consumer.
  virtual Status send_edge(const std::string& to_location, int64_t step, int64_t edge, EdgeValue value) = 0;
  // Gives one credit of `edge` back to the partition at `to_location` (the producer).
  virtual Status return_credit(const std::string& to_location, int64_t edge) = 0;
};

class EdgeRendezvous : public Rendezvous, public std::enable_shared_from_this<EdgeRendezvous> {
 public:
  using EdgeCallback = std::function<void(Result<EdgeValue>)>;
  using CreditCallback = std::function<void(Status)>;

  EdgeRendezvous(std::string location, std::shared_ptr<RemoteEdges> transport, int edge_capacity);
  const std::string& location() const { return location_; }
  RemoteEdges& transport() { return *transport_; }

  // Where `edge` comes from (its _Recv's send_task): a tensor dropped for an aborted
  // step still gives its credit back there, or the edge would lose one per failed step.
  void expect_edge(int64_t edge, const std::string& from_location);
  // The tensor an edge carries (its _Send's or _Recv's tensor_name, "edge_<id>_<producer>"),
  // for describe_waits, which names the producer.
  void name_edge(int64_t edge, const std::string& tensor_name);

  // From the transport.
  void on_edge(int64_t step, int64_t edge, EdgeValue value);
  void on_credit(int64_t edge);

  // From a _Send: `cb` runs once a credit of `edge` is taken for `step` (at once if one is
  // free), or with the error that aborted the step or the rendezvous.
  void when_credit(int64_t step, int64_t edge, CreditCallback cb);
  // From a _Recv: `cb` runs with the value of (step, edge) once it arrives; the credit
  // goes back to `from_location` as it is taken.
  void when_edge(int64_t step, int64_t edge, const std::string& from_location, EdgeCallback cb);

  // Fails the waiters of `step` (a deadline passed, a partition failed); values that
  // arrive for it later are dropped and their credits returned.
  void abort_step(int64_t step, const Status& why);
  // Forgets a finished step's abort mark (steps are only aborted, never reused, so this
  // only bounds memory).
  void forget_step(int64_t step);
  // Fails every waiter now and later: the session is closing.
  void abort_all(const Status& why);
  // What step `step` still waits for here, for a deadline's message: "edges 35 (dense/w),
  // 41 (loss) from /job:ps/task:1/cpu:0; credits of edges 7 (grad)", or "" when nothing. Only
  // the _Recv and _Send nodes that have run for the step wait here.
  std::string describe_waits(int64_t step);

 private:
  struct CreditWait {
    int64_t step;
    CreditCallback cb;
  };
  struct EdgeWait {
    std::string from;
    EdgeCallback cb;
  };
  void give_back_credit(const std::string& to, int64_t edge);

  std::string location_;
  std::shared_ptr<RemoteEdges> transport_;
  int capacity_;
  std::mutex mu_;
  Status closed_;
  std::map<int64_t, int> credits_;                        // edge -> free credits
  std::map<int64_t, std::vector<CreditWait>> credit_waits_;  // edge -> waiters, oldest first
  std::map<std::pair<int64_t, int64_t>, EdgeValue> arrived_;  // (step, edge)
  std::map<std::pair<int64_t, int64_t>, EdgeWait> edge_waits_;
  std::map<int64_t, Status> aborted_;                     // step -> why
  std::map<int64_t, std::string> sources_;                // edge -> producer's location
  std::map<int64_t, std::string> names_;                  // edge -> its producer node
};


// An in-process transport: locations attached to it deliver to each other directly, each
// value encoded to bytes and decoded again as if it crossed hosts. Real, not a mock: the
// partition tests run three partitions through it in one process.
class LoopbackEdges final : public RemoteEdges {
 public:
  void attach(const std::shared_ptr<EdgeRendezvous>& r);
  Status send_edge(const std::string& to_location, int64_t step, int64_t edge, EdgeValue value) override;
  Status return_credit(const std::string& to_location, int64_t edge) override;

 private:
  std::shared_ptr<EdgeRendezvous> find(const std::string& location);
  std::mutex mu_;
  std::map<std::string, std::weak_ptr<EdgeRendezvous>> by_location_;
};

}  // namespace actorflow::runtime
