// The front door: run parts of a graph with feeds and fetches. Session is declared here
// and implemented by the runtime layer (local actors) or the network layer (a cluster),
// through factories registered at link time, as TF's SessionFactory.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "actorflow/graph.h"

namespace actorflow {

struct SessionOptions {
  // Threads of the CPU device pool; 0 = the machine's cores.
  int intra_op_threads = 0;
  // Credits per edge: how many tensors may wait on one edge before its producer stalls
  // (OneFlow's register count). Bounds how many steps pipeline through a node.
  int edge_capacity = 2;
  // Record a timeline of every kernel; written as Chrome trace JSON at close() (or by
  // Session::write_trace) when trace_path is set.
  bool trace = false;
  std::string trace_path;
  // Send every edge (or the edges whose consumer or producer is named here) through
  // encode -> bytes -> decode, as if it crossed hosts.
  bool encode_all_edges = false;
  std::vector<std::string> encode_edges_of;
  // "" (default: the actor runtime) or "sequential" (the reference evaluator).
  std::string executor;
  // Where to run: "" = in process; "af://host:port" = a node daemon.
  std::string target;
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
};

// What a session backend implements.
class SessionImpl {
 public:
  virtual ~SessionImpl() = default;
  virtual Result<std::vector<Tensor>> run(const RunRequest& request) = 0;
  virtual Status close() = 0;
};

using SessionFactory =
    std::function<Result<std::unique_ptr<SessionImpl>>(Graph& graph, const SessionOptions& options)>;

// name: "local" (in-process actors), "sequential", "remote".
void register_session_factory(const std::string& name, SessionFactory factory);

class Session {
 public:
  // Throws af::Error if the session cannot be created (unknown op, missing kernel).
  explicit Session(Graph& graph, SessionOptions options = {});
  Session(Graph& graph, const std::string& target, SessionOptions options = {});
  static Result<std::unique_ptr<Session>> create(Graph& graph, SessionOptions options = {});
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Runs the nodes needed for `fetches` and `targets`. Safe to call from many threads.
  Result<std::vector<Tensor>> run(const std::vector<Fetch>& fetches, const FeedDict& feeds = {},
                                  const std::vector<Operation>& targets = {});
  // One tensor: sess.eval(y, feeds).
  Result<Tensor> eval(const Output& fetch, const FeedDict& feeds = {});
  // Runs every variable initializer of the graph.
  Status run_init();
  // Stops the actors; later runs fail. Called by the destructor.
  Status close();
  Graph& graph() { return graph_; }

 private:
  explicit Session(Graph& graph, std::unique_ptr<SessionImpl> impl);
  Graph& graph_;
  std::unique_ptr<SessionImpl> impl_;
};

}  // namespace actorflow
