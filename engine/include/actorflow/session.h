// The front door: run parts of a graph with feeds and fetches. Session is declared here
// and implemented by the runtime layer (local actors) or the network layer (a cluster),
// through factories registered at link time, as TF's SessionFactory.
#pragma once
#include "actorflow/api.h"
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "actorflow/graph.h"

AF_PUBLIC_BEGIN

namespace actorflow {

class CollectiveGroup;  // actorflow/collective.h

// Plan-time graph passes (TensorFlow's Grappler), each switchable. They run once per kind
// of step, on a copy of the plan's nodes; results are bit for bit those of the graph as
// written.
struct GraphOptimizerOptions {
  // Nodes whose inputs are all constants are computed once and become constants.
  bool constant_folding = true;
  // Identical stateless nodes (same op, attributes and inputs) run once.
  bool common_subexpressions = true;
  // Nodes that no fetch or target needs after the passes above are not run.
  bool prune = true;
  // MatMul followed by BiasAdd (and Relu) runs as one _FusedMatMul kernel (oneDNN's
  // post-ops) where the CPU kernels are built with oneDNN.
  bool fuse_matmul_bias_relu = true;
  // Conv2D followed by BiasAdd (and Relu) runs as one _FusedConv2D kernel (oneDNN's
  // post-ops, or a pass over each chunk of the output as the Eigen path writes it), and
  // the gradient of a Relu whose output is max-pooled runs within the pooling's gradient
  // (one _FusedMaxPoolGrad kernel). CPU only: graphs placed on a GPU keep their
  // convolutions unfused.
  bool fuse_conv_bias_relu = true;
  // A chain (or small DAG with one output) of f32 elementwise ops of one shape, whose
  // inner results nothing else reads, runs as one _FusedElementwise kernel: one pass
  // over the data in cache-sized blocks, no intermediate tensors, one actor.
  bool fuse_elementwise = true;
  // A cheap node (see actors/src/cheap_ops.h) whose every input comes from one actor runs
  // in that actor, right after its producer: fewer actors and fewer messages per step.
  bool colocate_cheap_ops = true;
  // A plan of only cheap nodes, or a serial one (stateless synchronous kernels whose
  // costly ones lie on one path, as an MLP's forward pass), runs on the thread that
  // called run() when the step has no deadline: the actors could not overlap its
  // kernels, and each hop costs a thread hand-off.
  bool caller_runs_small_steps = true;
  // The process-wide switches (runtime::RunPath, AF_COLOCATE_CHEAP_OPS and
  // AF_CALLER_RUNS_*_STEPS) can turn the last two off for every session as well; a
  // session gets them when both it and the process allow them.
};

struct SessionOptions {
  // Threads of the CPU device pool; 0 = the machine's cores.
  int intra_op_threads = 0;
  // Credits per edge: how many tensors may wait on one edge before its producer stalls
  // (OneFlow's register count). Bounds how many steps pipeline through a node.
  int edge_capacity = 2;
  // Record a timeline of every kernel; written as Chrome trace JSON to trace_path (which
  // also turns tracing on) when the session closes.
  bool trace = false;
  std::string trace_path;
  // Send every edge (or the edges whose consumer or producer is named here) through
  // encode -> bytes -> decode, as if it crossed hosts.
  bool encode_all_edges = false;
  std::vector<std::string> encode_edges_of;
  // "" (default: the actor runtime) or "sequential" (the reference evaluator).
  std::string executor;
  // Where to run: "" = in process; "af://host:port" = the whole graph on an
  // actorflow-node daemon (net/'s "remote" backend).
  std::string target;
  // A step that has not finished after this long fails with deadline_exceeded; 0: no
  // deadline. RunOptions::timeout_ms overrides it for one run.
  int64_t step_timeout_ms = 0;
  // The most bytes this session's kernels may hold at once (tensors and variables); an
  // allocation beyond fails its step with resource_exhausted. 0: no limit.
  int64_t memory_limit_bytes = 0;
  // Prepared kinds of step (distinct fetch/feed/target lists) kept, each a set of node
  // actors; beyond this the least recently used idle one is shut down.
  int max_cached_plans = 32;
  GraphOptimizerOptions optimizer;
  // Cluster targets only: sessions that name the same container share the variables
  // (and the coordination state of sync and bounded-staleness training) that live on a
  // daemon, as all sessions on a TF server share its default container; this is how the
  // workers of between-graph replication train one model. A daemon keeps a container's
  // variables and coordination state until it stops, whoever is connected (a hung or
  // cut-off ps loses nothing); a session's own ("") go when its last partition is closed.
  std::string shared_container;
  // The group this session's collective ops (CollectiveAllReduce, CollectiveBroadcast)
  // reduce with: all-reduce training's replicas, one session per process. In-process
  // sessions only; null: a collective op fails its step saying there is no group.
  std::shared_ptr<CollectiveGroup> collective_group;
};

// Per-run settings, as TF's RunOptions.
struct RunOptions {
  // Fail the step with deadline_exceeded after this long; 0: the session's
  // step_timeout_ms.
  int64_t timeout_ms = 0;
};

// One thing to fetch: a tensor, or an op run for its effect (yields an empty Tensor).
struct Fetch {
  Fetch(const Output& o) : output(o) {}  // NOLINT: implicit by design
  Fetch(const Operation& op) : output(op.output(0)), is_op(true) {}  // NOLINT
  Output output;
  bool is_op = false;
};

using FeedDict = std::vector<std::pair<Output, Tensor>>;

struct RunRequest {
  std::vector<Fetch> fetches;
  FeedDict feeds;
  std::vector<Operation> targets;
  RunOptions options;
};

// One kind of step prepared by a backend, run many times with fresh feed values.
class PreparedStep {
 public:
  virtual ~PreparedStep() = default;
  // feeds: one tensor per fed output, in the prepared order.
  virtual Result<std::vector<Tensor>> run(const std::vector<Tensor>& feeds, const RunOptions& options) = 0;
};

// What a session backend implements.
class SessionImpl {
 public:
  virtual ~SessionImpl() = default;
  virtual Result<std::vector<Tensor>> run(const RunRequest& request) = 0;
  virtual Status close() = 0;
  // Prepares `request`'s fetches, feeds and targets once (its feed values are ignored).
  // The default runs the whole request each time; backends override it to skip the
  // plan lookup.
  virtual Result<std::shared_ptr<PreparedStep>> prepare(const RunRequest& request);
};

// A step prepared once and called many times, as TF's Session::MakeCallable: each call
// skips the graph-ownership checks, the plan lookup and the fetch/feed bookkeeping.
// Valid while its session is open; a call after close() fails.
class Callable {
 public:
  Callable() = default;
  // One tensor per feed given to make_callable, in that order.
  Result<std::vector<Tensor>> operator()(const std::vector<Tensor>& feeds = {}, const RunOptions& options = {}) const;
  bool valid() const { return step_ != nullptr; }

 private:
  friend class Session;
  Callable(std::shared_ptr<PreparedStep> step, size_t num_feeds) : step_(std::move(step)), num_feeds_(num_feeds) {}
  std::shared_ptr<PreparedStep> step_;
  size_t num_feeds_ = 0;
};

using SessionFactory =
    std::function<Result<std::unique_ptr<SessionImpl>>(Graph& graph, const SessionOptions& options)>;

// name: "local" (in-process actors), "sequential", "remote".
void register_session_factory(const std::string& name, SessionFactory factory);

// A session runs one graph. Create it with Session::create, which returns a Result: a
// session may fail to start for reasons outside the program (an op without a kernel on
// this machine, a backend not linked in, a remote target that does not answer).
//
//   auto sess = af::Session::create(g);
//   if (!sess.ok()) { std::cerr << sess.status().to_string() << "\n"; return 1; }
//   auto out = sess->run({y}, {{x, batch}});
//
// Sessions move but do not copy; a moved-from session is closed. The graph must outlive
// the session, and nodes added to it later are seen by later runs.
class Session {
 public:
  static Result<Session> create(Graph& graph, SessionOptions options = {});
  // The same with options.target = target ("af://host:port"; see SessionOptions::target).
  static Result<Session> create(Graph& graph, const std::string& target, SessionOptions options = {});

  ~Session();
  Session(Session&& other) noexcept;
  Session& operator=(Session&& other) noexcept;
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Runs the nodes needed for `fetches` and `targets`. Safe to call from many threads.
  Result<std::vector<Tensor>> run(const std::vector<Fetch>& fetches, const FeedDict& feeds = {},
                                  const std::vector<Operation>& targets = {});
  // The same, with per-run options (a deadline), as TF's Run(RunOptions, ...).
  Result<std::vector<Tensor>> run(const RunOptions& options, const std::vector<Fetch>& fetches,
                                  const FeedDict& feeds = {}, const std::vector<Operation>& targets = {});
  // Prepares a step for repeated calls (the low-latency path for serving and tight
  // loops): `feeds` are the outputs whose values each call passes, in order.
  Result<Callable> make_callable(const std::vector<Fetch>& fetches, const std::vector<Output>& feeds = {},
                                 const std::vector<Operation>& targets = {});
  // One tensor: sess.eval(y, feeds).
  Result<Tensor> eval(const Output& fetch, const FeedDict& feeds = {});
  // Runs every variable initializer of the graph.
  Status run_init();
  // Stops the actors; later runs fail. Called by the destructor.
  Status close();
  Graph& graph() { return *graph_; }

 private:
  Session(Graph& graph, std::unique_ptr<SessionImpl> impl);
  Graph* graph_;
  std::unique_ptr<SessionImpl> impl_;
};

}  // namespace actorflow

AF_PUBLIC_END
