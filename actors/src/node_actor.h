// Internal to the runtime: the node actor and the tables it shares with its executor.
#pragma once
#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "actor_system.h"
#include "executor.h"

namespace actorflow::runtime {

// A tensor (or a failed step's error) travelling along one edge for one step. When the
// edge is encoded, `wire` carries Cap'n Proto TensorMsg bytes instead of `tensor`.
struct EdgeMsg {
  int64_t step = 0;
  int32_t slot = 0;
  Tensor tensor;
  std::shared_ptr<const Status> error;
  std::shared_ptr<const std::string> wire;
  std::shared_ptr<StepState> state;
};

// What a node actor handles, in the order it was posted: an edge's tensor, a source's
// start, a credit handed back to a producer that waited for one, an async kernel's end,
// and the request to stop.
struct NodeMsg {
  enum class Kind : uint8_t { input, start, credit, done, exit };
  explicit NodeMsg(Kind k) : kind(k) {}
  Kind kind;
  EdgeMsg edge;       // input; start uses step and state, done uses step
  caf::error reason;  // exit
  NodeMsg* next = nullptr;
};

// The one CAF message a node actor gets besides its exit: "your inbox is yours now, run
// it". Everything else arrives through the inbox.
using run_atom = caf::atom_constant<caf::atom("run")>;

struct OutEdge {
  int consumer = -1;  // node index
  int slot = 0;       // consumer's input slot (data inputs first, then control inputs)
  int credit = 0;     // index into the producing actor's credit counters (-1: internal)
  bool encode = false;
  // The consumer runs in the producer's actor (colocated): the tensor is handed over
  // in place, with no message and no credit.
  bool internal = false;
};

struct InEdge {
  int producer = -1;  // the producing actor's node index; -1: no credit to return
  int credit = 0;
};

// Everything a node actor needs to know about its node, fixed at prepare time.
struct NodeRuntime {
  const Node* node = nullptr;
  std::shared_ptr<OpKernel> kernel;     // shared with the session's other executors
  std::shared_ptr<std::mutex> kernel_mu; // held while a stateful kernel computes
  DeviceContext* device = nullptr;          // a GPU node's context; null: the executor's CPU
  int num_slots = 0;                        // data + control inputs
  int dynamic_slots = 0;                    // slots that receive a message each step
  std::vector<Tensor> bound;                // per data input: a constant bound at prepare time
  std::vector<InEdge> in_edges;             // per slot
  std::vector<std::vector<OutEdge>> out;    // per output
  std::vector<OutEdge> control_out;
  int num_credits = 0;
  std::vector<std::pair<int, int>> fetches; // (output, result index)
  int finishes = 0;                         // times this node is a target / fetched op
  bool is_source = false;                   // fires on a start message
  bool inert = false;                       // a constant nobody needs per step
  bool cheap = false;                       // is_cheap (cheap_ops.h)
  // Colocation: the node whose actor runs this one (its own index when it has an actor),
  // and for such a head, the cheap nodes it runs after itself, in topological order.
  int head = -1;
  int member_pos = -1;                      // index in the head's members
  std::vector<int> members;
};

// Runs a synchronous kernel (under its lock when it is stateful). A kernel that throws (a
// bug, a failed allocation) fails its step like one that reports an error: an escaped
// exception would kill the actor, or reach the caller running an inline step.
void compute_kernel(const NodeRuntime& rt, OpKernelContext& ctx);

// Where each feed goes: the (node, slot) pairs that take it, and fetches of the fed
// tensor itself.
struct FeedRoute {
  std::vector<std::pair<int, int>> consumers;
  std::vector<int> results;
};

// An actor's credits on its out edges (edge_capacity each), shared with its consumers:
// a consumer hands a credit back by an atomic add, and sends a message only when the
// producer has stopped for want of one. A chain of actors then exchanges one message per
// hop, not two.
struct Credits {
  Credits(int n, int capacity) : count(new std::atomic<int>[static_cast<size_t>(n)]), size(n) {
    for (int i = 0; i < n; ++i) count[static_cast<size_t>(i)].store(capacity, std::memory_order_relaxed);
  }
  bool all_positive() const {
    for (int i = 0; i < size; ++i)
      if (count[static_cast<size_t>(i)].load() <= 0) return false;
    return true;
  }
  std::unique_ptr<std::atomic<int>[]> count;
  int size;
  // Set by the producer before it looks at its counts a last time; a consumer that finds
  // it set after its add wakes the producer (one of the two always sees the other).
  std::atomic<bool> starved{false};
};

class NodeActor;

struct ExecutorShared {
  ExecutorEnv env;
  std::shared_ptr<const OptimizedPlan> plan;  // owns the rewritten nodes NodeRuntime points at
  std::vector<NodeRuntime> nodes;
  std::vector<caf::actor> actors;
  std::vector<NodeActor*> node_actors;  // the same actors, for posting to their inboxes
  std::vector<std::unique_ptr<Credits>> credits;  // per node with an actor and out edges
  std::string device_name;
  // Set before the executor stops its actors: an actor exiting without it has died.
  std::atomic<bool> closing{false};
  // Why the executor can run no more steps (a node actor died); OK while healthy.
  std::mutex broken_mu;
  Status broken;
  // Actors not yet exited: shutdown waits for zero, because an actor inside a kernel
  // still reads the graph, which the session's owner may free once close() returns.
  std::mutex live_mu;
  std::condition_variable live_cv;
  int live_actors = 0;
};

// A node of a step plan as an actor. Its messages go through its own inbox rather than
// CAF's mailbox: whichever thread posts to an idle actor takes the inbox over and runs
// it, in place when that thread has a runner (in_place_runner.h), else by one run
// message to the actor on CAF's workers. One owner at a time handles messages, as one
// CAF turn would, so the actor's state needs no lock; a hop costs a heap node and two
// atomic operations instead of CAF's mailbox, scheduling and message matching. CAF
// keeps what it is for: the workers, the actor's life, its exit.
class NodeActor : public caf::event_based_actor {
 public:
  NodeActor(caf::actor_config& cfg, std::shared_ptr<ExecutorShared> shared, int index);
  ~NodeActor() override;
  caf::behavior make_behavior() override;
  // Hands `m` to this actor, from any thread.
  void post(std::unique_ptr<NodeMsg> m);
  // For the thread that owns the inbox: runs it here, or hands it to CAF's workers, from
  // whom take_back() may claim it again before any of them has (true: it is this
  // thread's again).
  void run_here() { drain(false); }
  void hand_to_workers();
  bool take_back() { return handed_.exchange(false); }
  // A turn of it is short: its kernel is cheap (cheap_ops.h), or async, so that a turn
  // only starts (or finishes) the kernel's work.
  bool quick() const { return async_ || rt_.cheap; }
  // Fails the steps this actor still holds if it is dying rather than being shut down,
  // then drops its share of the executor tables (breaking the actor <-> table cycle).
  void on_exit() override;

 private:
  struct Slot {
    bool live = false;
    int remaining = 0;
    std::vector<Tensor> inputs;
    std::shared_ptr<const Status> error;
    std::shared_ptr<StepState> state;
  };

  // Inputs of a colocated node, filled by its producers in this actor during one firing.
  struct MemberInputs {
    std::vector<Tensor> inputs;
    std::shared_ptr<const Status> error;
  };

  // An async kernel in flight: the node fires nothing else until it is done.
  struct Running {
    int64_t step = 0;
    std::unique_ptr<OpKernelContext> ctx;
    std::shared_ptr<StepState> state;
    int64_t t0 = 0;
  };

  enum : int { kIdle, kOwned, kClosed };
  bool try_own() {
    int idle = kIdle;
    return state_.compare_exchange_strong(idle, kOwned);
  }
  // The owner's loop: handles the inbox until it is empty (then lets go of it), its turn
  // is over, or the actor may quit (only inside CAF's turn, `in_caf`, may it).
  void drain(bool in_caf);
  void push(NodeMsg* m);
  void handle(NodeMsg& m);
  // The thread that now owns the inbox runs it here, or CAF's workers do.
  void schedule_owned();
  static void free_list(NodeMsg* m);

  Slot& slot_for(int64_t step, const std::shared_ptr<StepState>& state);
  void on_input(EdgeMsg& m);
  void try_fire();
  void fire(Slot& s, int64_t step);
  // Finishes the async kernel of `step` (its done callback has run), and quits if an
  // exit waited for it.
  void on_async_done(int64_t step);
  // Runs a synchronous kernel of this actor (its own or a colocated node's) and finishes it.
  void compute(const NodeRuntime& rt, std::vector<Tensor> inputs, int64_t step, const std::shared_ptr<StepState>& state);
  // Runs the colocated nodes for a step whose head has finished.
  void run_members(int64_t step, const std::shared_ptr<StepState>& state);
  // Records a kernel's outcome and sends outputs, error tokens and fetches (hands them
  // over in place to colocated consumers), and returns its producers' credits.
  void finish(const NodeRuntime& rt, int64_t step, const std::shared_ptr<StepState>& state, OpKernelContext* ctx,
              std::shared_ptr<const Status> err, int64_t t0);
  void send_edge(const NodeRuntime& rt, const OutEdge& e, int64_t step, const Tensor& t,
                 const std::shared_ptr<const Status>& err, const std::shared_ptr<StepState>& state, int output);

  std::shared_ptr<ExecutorShared> shared_;
  NodeRuntime& rt_;
  int index_;
  // How a step's running kernels name this node's async kernel in a deadline's message
  // ("" when it is synchronous, or a _Send/_Recv, whose waits the rendezvous names).
  std::string async_label_;
  bool async_ = false;
  std::deque<Slot> window_;  // window_[k] is step next_step_ + k
  int64_t next_step_ = 0;
  Credits* credits_ = nullptr;  // null: no out edge to another actor
  std::unique_ptr<Running> running_;
  std::vector<MemberInputs> members_;  // per colocated node, reused every firing
  // An exit asked for while an async kernel runs waits for it: the kernel writes into
  // running_->ctx until it calls done.
  bool quit_when_idle_ = false;
  caf::error quit_reason_;

  // Posted, not yet taken: a stack, newest first (pushed by any thread).
  std::atomic<NodeMsg*> inbox_{nullptr};
  std::atomic<int> state_{kIdle};
  // The owner handed the inbox over and a run message is on its way: whoever clears
  // this first (that message's turn, or take_back) owns the inbox.
  std::atomic<bool> handed_{false};
  // Taken from the inbox by the owner, oldest first, not yet handled.
  NodeMsg* taken_ = nullptr;
};

}  // namespace actorflow::runtime


