// What a node daemon does with the graphs clients register (TF's Worker + GraphMgr, kept
// small): each RegisterGraph gets a handle and its own local af::Session; RunStep runs on
// a worker thread of the pool below, or, for a kind of step that ran on its caller's
// thread with cheap kernels only, on the io thread (try_run_inline); a connection's graphs
// are freed when it closes. Steps of one graph may run concurrently (Session::run is
// thread-safe); a graph closed while a step runs is freed after that step.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <thread>
#include <vector>

#include "actorflow/graph.h"
#include "actorflow/session.h"
#include "frame_messages.h"

namespace actorflow::net {

// Threads running queued jobs; drain() waits for the queue to empty. With `max_threads`
// above `threads`, a job posted while no thread is idle gets a new thread, up to that many
// (threads that only wait for something else to happen need no cap of their own).
class WorkerPool {
 public:
  explicit WorkerPool(int threads, int max_threads = 0);
  ~WorkerPool();
  void post(std::function<void()> job);
  // Waits until no job is queued or running, or the deadline passes; true when idle.
  bool drain(std::chrono::steady_clock::time_point deadline);
  // Stops the threads after the jobs already queued.
  void stop();
  int busy() const;

 private:
  void loop();
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::condition_variable idle_cv_;
  std::deque<std::function<void()>> jobs_;
  int running_ = 0;
  int idle_ = 0;
  size_t max_threads_ = 0;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

class WorkerService {
 public:
  // `task` names this daemon in errors ("/job:worker/task:0 at 127.0.0.1:2222").
  explicit WorkerService(std::string where);
  ~WorkerService();

  // Parses and prepares a graph for connection `owner`: a handle, or why not.
  Result<uint64_t> register_graph(const std::string& graph_def, uint64_t owner);
  // Adds the nodes of `graph_def` beyond those of graph `handle` to it (the client's
  // graph grew); its first nodes must be the registered ones. Steps in flight finish first.
  Status extend_graph(uint64_t handle, const std::string& graph_def, uint64_t owner);
  // Runs one step; blocks (call it on a worker thread). Errors name this daemon.
  StepDoneMsg run_step(const RunStepMsg& m, uint64_t owner);
  // Runs the step here and now when its kind (fetches, feeds, targets) last ran to its
  // end on the calling thread with only cheap kernels (an all-cheap plan: no wait on any
  // other thread, microseconds), so the daemon's io thread may run it; nullopt (nothing
  // done) otherwise, or while the graph is being extended. Such a kind keeps a Callable
  // (no plan lookup, no names resolved per step). A kind that stops running on its
  // caller is forgotten after that one step.
  std::optional<StepDoneMsg> try_run_inline(const RunStepMsg& m, uint64_t owner);
  void close_graph(uint64_t handle, uint64_t owner);
  // Frees every graph of a connection that went away; returns how many.
  size_t close_owner(uint64_t owner);
  size_t num_graphs() const;

 private:
  struct Entry {
    uint64_t owner = 0;
    std::unique_ptr<Graph> graph;
    std::unique_ptr<Session> session;
    // Steps share it; extending the graph takes it alone.
    std::shared_mutex mu;
    // The kinds of step (step_kind) that ran on their caller's thread last time, each
    // prepared once (at most kMaxInlineKinds: a Callable holds its plan's executor).
    std::mutex kinds_mu;
    std::map<std::string, Callable> inline_kinds;
    ~Entry();
  };
  std::shared_ptr<Entry> find(uint64_t handle, uint64_t owner) const;
  static constexpr size_t kMaxInlineKinds = 32;
  struct Resolved {
    FeedDict feeds;
    std::vector<Fetch> fetches;
    std::vector<Operation> targets;
  };
  static Result<Resolved> resolve(Graph& g, const RunStepMsg& m);
  // Runs with e.mu held shared by the caller.
  Result<std::vector<Tensor>> run_entry(Entry& e, const RunStepMsg& m);
  StepDoneMsg finish(const RunStepMsg& m, Result<std::vector<Tensor>> out);
  void forget_kind(Entry& e, const RunStepMsg& m);

  std::string where_;
  mutable std::mutex mu_;
  std::map<uint64_t, std::shared_ptr<Entry>> graphs_;
  uint64_t next_handle_ = 1;
};

}  // namespace actorflow::net
