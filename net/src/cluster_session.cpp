// The cluster session (cluster_session.h), TF's MasterSession kept small: per kind of
// step (fetches, feeds, targets) it prunes the graph to what the step needs, cuts it
// with partition() by location, registers every partition with the worker of its task
// (worker_interface.h: each partition lists every location's daemon address, so the
// daemons exchange edges directly), then runs each step as one RunStep per partition,
// all with the same step id, concurrently, and gathers the fetches; the first failure
// ends the step at the partitions still running. Steps start in one order on every
// daemon (see run()). Every wait is bounded: a step without a timeout gets
// kDefaultStepTimeoutMs. A graph that grew is cut and registered again; its variables
// live on, since all partitions of a session share their location's variables on the
// daemon (RegisterGraph.variableScope).
// The session holds one worker per location, which every kind of step shares (step ids
// are the session's, so its answers never mix): a kind that goes away closes its
// partitions, and a worker whose daemon went away is replaced by the next kind
// registered. A worker is this process's own daemon by direct calls when one listens at
// the address, else a connection.
// A session on one daemon (the target "af://host:port") is a cluster of one task: the
// whole graph is one partition there, whatever devices its nodes name.
#include "cluster_session.h"

#include <atomic>
#include <condition_variable>
#include <deque>
#include <future>
#include <map>
#include <mutex>
#include <random>
#include <set>

#include "actorflow/device_name.h"
#include "actorflow/graph_partition.h"
#include "actorflow/tensor_codec.h"
#include "connection_client.h"
#include "token.h"
#include "worker_interface.h"

namespace actorflow::net {
namespace {

constexpr int64_t kDefaultStepTimeoutMs = 60000;
constexpr int64_t kConnectTimeoutMs = 10000;

struct TaskAddress {
  std::string task;  // "/job:worker/task:0"
  std::string host;
  uint16_t port = 0;
  // "host:port", an IPv6 host in brackets.
  std::string address() const {
    return (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" + std::to_string(port);
  }
};

Result<std::vector<TaskAddress>> parse_cluster_target(const std::string& target) {
  std::vector<TaskAddress> out;
  size_t i = 0;
  int index = 0;
  while (i <= target.size()) {
    size_t j = target.find(',', i);
    if (j == std::string::npos) j = target.size();
    std::string entry = target.substr(i, j - i);
    i = j + 1;
    if (entry.empty()) continue;
    auto bad = [&](const std::string& why) {
      return invalid_argument("cluster target '" + target + "': entry '" + entry + "' " + why +
                              " (want af://host:port or /job:J/task:T=af://host:port, comma-separated)");
    };
    TaskAddress t;
    size_t eq = entry.find('=');
    if (eq != std::string::npos) {
      auto d = parse_device_name(entry.substr(0, eq));
      if (!d.ok() || !d->has_job() || !d->has_task() || d->has_device()) return bad("has a bad task name");
      t.task = d->task_name();
      entry = entry.substr(eq + 1);
    } else {
      t.task = "/job:worker/task:" + std::to_string(index);
    }
    ++index;
    if (entry.rfind("af://", 0) != 0) return bad("does not start with af://");
    std::string rest = entry.substr(5);
    while (!rest.empty() && rest.back() == '/') rest.pop_back();
    size_t colon = rest.rfind(':');
    if (colon == std::string::npos || colon == 0) return bad("has no port");
    t.host = rest.substr(0, colon);
    if (t.host.size() > 2 && t.host.front() == '[' && t.host.back() == ']') t.host = t.host.substr(1, t.host.size() - 2);
    std::string port = rest.substr(colon + 1);
    if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos) return bad("has a bad port");
    int p = std::stoi(port);
    if (p < 1 || p > 65535) return bad("has a port out of range");
    t.port = static_cast<uint16_t>(p);
    for (auto& o : out)
      if (o.task == t.task) return bad("repeats task " + t.task);
    out.push_back(std::move(t));
  }
  if (out.empty()) return invalid_argument("cluster target '" + target + "' lists no daemon");
  return out;
}

class ClusterSession final : public SessionImpl {
 public:
  using Clock = WorkerInterface::Clock;

  // `one_daemon`: the target named one daemon and no task, so every node runs there.
  ClusterSession(Graph& g, const SessionOptions& opts, std::vector<TaskAddress> tasks, std::string token, bool one_daemon)
      : graph_(g), opts_(opts), tasks_(std::move(tasks)), token_(std::move(token)), one_daemon_(one_daemon) {
    std::random_device rd;
    session_base_ = (static_cast<uint64_t>(rd()) << 32 | rd()) & ~uint64_t{0xffff};
  }
  ~ClusterSession() override { (void)close(); }

  // A session on one daemon connects at once, so that create() fails for a daemon that
  // does not answer.
  Status open() {
    if (!one_daemon_) return Status::OK();
    auto deadline = Clock::now() + std::chrono::milliseconds(connect_timeout_ms(opts_.step_timeout_ms));
    std::lock_guard<std::mutex> lock(mu_);
    const TaskAddress& t = tasks_.front();
    return worker_for(t.task + "/cpu:0", t, deadline).status();
  }

  Result<std::vector<Tensor>> run(const RunRequest& req) override {
    int64_t timeout_ms = req.options.timeout_ms > 0 ? req.options.timeout_ms : opts_.step_timeout_ms;
    if (timeout_ms <= 0) timeout_ms = kDefaultStepTimeoutMs;
    auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
    AF_ASSIGN_OR_RETURN(std::shared_ptr<Kind> kind, kind_for(req, deadline));
    // Step ids are taken and the steps sent under one lock, so every daemon of a kind of
    // step starts them in one order: node actors fire steps in the order they started,
    // and two daemons starting two steps in different orders could each hold the credit
    // the other's edge needs. The waiting happens outside the lock: steps pipeline.
    std::unique_lock<std::mutex> start_lock(step_mu_);
    uint64_t step = next_step_++;
    // Split the request by location.
    std::map<std::string, RunStepMsg> msgs;
    for (auto& [loc, p] : kind->parts) {
      RunStepMsg& m = msgs[loc];
      m.handle = p.handle;
      m.step_id = step;
    }
    std::vector<std::pair<std::string, size_t>> where(req.fetches.size(), {"", SIZE_MAX});
    for (size_t i = 0; i < req.fetches.size(); ++i) {
      const Fetch& f = req.fetches[i];
      AF_ASSIGN_OR_RETURN(std::string loc, location_of(*kind, f.output.node().name));
      if (f.is_op) {
        msgs[loc].targets.push_back(f.output.node().name);
      } else {
        where[i] = {loc, msgs[loc].fetches.size()};
        msgs[loc].fetches.push_back(f.output.name());
      }
    }
    for (auto& op : req.targets) {
      AF_ASSIGN_OR_RETURN(std::string loc, location_of(*kind, op.name()));
      msgs[loc].targets.push_back(op.name());
    }
    for (auto& [out, value] : req.feeds) {
      auto it = kind->meta_location.find(out.node().name);
      if (it == kind->meta_location.end()) continue;  // nothing this step needs reads it
      TensorMessage tm;
      tm.step_id = static_cast<int64_t>(step);
      tm.producer = out.name();
      tm.tensor = value;
      msgs[it->second].feeds.emplace_back(out.name(), std::move(tm));
    }
    std::map<std::string, StepDoneMsg> done;
    if (msgs.size() == 1) {
      // One partition has no order to agree on with another daemon, and no other
      // partition to wait for: the worker runs it, a connection on this thread.
      start_lock.unlock();
      auto& [loc, m] = *msgs.begin();
      AF_RETURN_IF_ERROR(run_one(*kind, loc, std::move(m), deadline, done));
    } else {
      AF_RETURN_IF_ERROR(run_many(*kind, step, msgs, deadline, start_lock, done));
    }
    std::vector<Tensor> out(req.fetches.size());
    for (size_t i = 0; i < out.size(); ++i) {
      auto& [loc, k] = where[i];
      if (k == SIZE_MAX) continue;
      auto& fetched = done[loc].fetched;
      if (k >= fetched.size()) return data_loss("the daemon of " + loc + " answered too few tensors");
      TensorMessage& t = fetched[k];
      if (!t.status.ok()) return t.status.with_context("a tensor fetched from " + loc);
      out[i] = std::move(t.tensor);
    }
    return out;
  }

  Status close() override {
    std::map<std::string, std::shared_ptr<WorkerInterface>> workers;
    std::map<std::string, std::shared_ptr<Kind>> kinds;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (closed_) return Status::OK();
      closed_ = true;
      kinds.swap(kinds_);
      workers.swap(workers_);
    }
    // The kinds close their partitions first; then the workers go, and a connection
    // closing frees whatever its daemon still holds of this session.
    kinds.clear();
    return Status::OK();
  }

 private:
  struct Part {
    std::shared_ptr<WorkerInterface> worker;
    uint64_t handle = 0;
  };
  // One kind of step, registered.
  struct Kind {
    uint64_t graph_version = 0;
    std::map<std::string, Part> parts;                    // location -> its worker and handle
    std::map<std::string, std::string> meta_location;     // node name -> location
    bool broken = false;
    Kind() = default;
    Kind(const Kind&) = delete;
    Kind& operator=(const Kind&) = delete;
    // A kind replaced (its graph grew, a peer was lost), or whose registration failed
    // half-way: its workers stay for the session's other kinds, so its partitions are
    // closed here (a dead connection's are gone with it).
    ~Kind() {
      for (auto& [loc, p] : parts)
        if (p.worker && p.handle) p.worker->close_partition(p.handle);
    }
  };

  static int64_t connect_timeout_ms(int64_t step_timeout_ms) {
    return step_timeout_ms > 0 ? std::min(step_timeout_ms, kConnectTimeoutMs) : kConnectTimeoutMs;
  }

  // A failed step's status, and whether its kind must be registered afresh: its worker
  // did not answer (the daemon went away), or answered that it cannot reach a peer daemon
  // (their connection was lost, e.g. one of them restarted; registering anew makes the
  // daemons dial each other again).
  void note_failure(Kind& k, bool answered, const Status& s) {
    if (!answered || s.code() == Code::unavailable) forget(k);
  }

  Status run_one(Kind& kind, const std::string& loc, RunStepMsg m, Clock::time_point deadline,
                 std::map<std::string, StepDoneMsg>& done) {
    Result<StepDoneMsg> r = kind.parts.at(loc).worker->run_step(std::move(m), deadline);
    Status s = r.ok() ? r->status : r.status();
    if (!s.ok()) {
      note_failure(kind, r.ok(), s);
      return s;
    }
    done[loc] = std::move(*r);
    return Status::OK();
  }

  // Starts the step on every partition (`start_lock` held, released here once they have
  // started), then waits for all of them; the first failure ends it at the others.
  Status run_many(Kind& kind, uint64_t step, std::map<std::string, RunStepMsg>& msgs, Clock::time_point deadline,
                  std::unique_lock<std::mutex>& start_lock, std::map<std::string, StepDoneMsg>& done) {
    // One thread waits for every partition: each worker's answer (or its end) queues its
    // location here.
    struct Arrivals {
      std::mutex mu;
      std::condition_variable cv;
      std::deque<std::string> ready;
    };
    auto arrivals = std::make_shared<Arrivals>();
    auto arrived = [arrivals](const std::string& loc) {
      std::lock_guard<std::mutex> lock(arrivals->mu);
      arrivals->ready.push_back(loc);
      arrivals->cv.notify_one();
    };
    std::map<std::string, Status> start_failed;
    std::set<std::string> running;
    for (auto& [loc, m] : msgs) {
      running.insert(loc);
      Status st = kind.parts.at(loc).worker->start_step(std::move(m), deadline, [arrived, loc = loc] { arrived(loc); });
      if (!st.ok()) {
        start_failed[loc] = st;
        arrived(loc);
      }
    }
    start_lock.unlock();
    // root: a partition's own error; lost: a worker that did not answer (cut link, dead
    // connection), which names it; first: whatever failed first (aborts included).
    Status first, root, lost;
    bool cleaned = false;
    // The daemons answer by the step's deadline; past it (plus slack for the answer to
    // travel), every partition still out is asked once more and fails at once. Once one
    // has failed, the others (told to end the step) get a short grace only: a daemon
    // behind a cut link never answers, and the step must still fail by its deadline.
    auto give_up = deadline + std::chrono::seconds(5);
    while (!running.empty()) {
      std::string loc;
      {
        std::unique_lock<std::mutex> lock(arrivals->mu);
        arrivals->cv.wait_until(lock, give_up, [&] { return !arrivals->ready.empty(); });
        if (!arrivals->ready.empty()) {
          loc = arrivals->ready.front();
          arrivals->ready.pop_front();
        } else {
          loc = *running.begin();
        }
      }
      if (!running.erase(loc)) continue;
      auto failed = start_failed.find(loc);
      // Past give_up (a partition failed, and the others had their grace), it answers
      // now or fails now, rather than at the step's deadline.
      Result<StepDoneMsg> r = failed != start_failed.end()
                                  ? Result<StepDoneMsg>(failed->second)
                                  : kind.parts.at(loc).worker->wait_step(step, std::min(deadline, give_up));
      Status s = r.ok() ? r->status : r.status();
      if (s.ok()) {
        done[loc] = std::move(*r);
      } else {
        if (first.ok()) first = s;
        // A partition aborted because another failed is not the cause: prefer the other.
        if (root.ok() && s.code() != Code::deadline_exceeded && s.code() != Code::cancelled) root = s;
        if (!r.ok() && lost.ok()) lost = s;
        note_failure(kind, r.ok(), s);
      }
      // The first failure ends the step everywhere: partitions waiting for its edges
      // would otherwise sit until their deadline.
      if (!first.ok() && !cleaned) {
        cleaned = true;
        auto now = Clock::now();
        give_up = std::min(give_up, now + (now >= deadline ? std::chrono::milliseconds(200) : std::chrono::milliseconds(1000)));
        Status why = cancelled("step " + std::to_string(step) + " failed elsewhere: " + first.message());
        for (auto& other : running) {
          const Part& p = kind.parts.at(other);
          p.worker->cleanup_step(p.handle, step, why);
        }
      }
    }
    if (!root.ok()) return root;
    if (!lost.ok()) return lost;
    return first;
  }

  Result<std::string> location_of(const Kind& k, const std::string& node) const {
    auto it = k.meta_location.find(node);
    if (it == k.meta_location.end()) return internal_error("node '" + node + "' was not placed");
    return it->second;
  }

  void forget(Kind& k) {
    std::lock_guard<std::mutex> lock(mu_);
    k.broken = true;
  }

  static std::string request_key(const RunRequest& req) {
    std::string key;
    for (auto& f : req.fetches) key += (f.is_op ? "o" : "f") + f.output.name() + ";";
    for (auto& [o, v] : req.feeds) key += "i" + o.name() + ";";
    for (auto& t : req.targets) key += "t" + t.name() + ";";
    return key;
  }

  Result<std::shared_ptr<Kind>> kind_for(const RunRequest& req, Clock::time_point step_deadline) {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) return failed_precondition("session is closed");
    std::string key = request_key(req);
    auto it = kinds_.find(key);
    // A kind whose worker is gone (the task was lost, maybe restarted since) is
    // registered afresh: the new incarnation has none of the old partitions.
    auto all_alive = [](const Kind& k) {
      for (auto& [loc, p] : k.parts)
        if (!p.worker->alive()) return false;
      return true;
    };
    if (it != kinds_.end() && !it->second->broken && it->second->graph_version == graph_.version() && all_alive(*it->second))
      return it->second;
    AF_ASSIGN_OR_RETURN(std::shared_ptr<Kind> k, register_kind(req, step_deadline));
    kinds_[key] = k;
    return k;
  }

  // By the step's deadline: a daemon behind a cut link (no RST, the dial hangs) fails the
  // step in time, naming it. mu_ held.
  Result<std::shared_ptr<Kind>> register_kind(const RunRequest& req, Clock::time_point step_deadline) {
    auto deadline = std::min(step_deadline, Clock::now() + std::chrono::milliseconds(kConnectTimeoutMs));
    std::vector<int> wanted;
    for (auto& f : req.fetches) wanted.push_back(f.output.node_id());
    for (auto& t : req.targets) wanted.push_back(t.node_id());
    PartitionOptions popts;
    popts.default_location = tasks_.front().task + "/cpu:0";
    popts.nodes = graph_.prune(wanted);
    if (one_daemon_) {
      // The one daemon runs the whole graph, placing its nodes on its own devices as a
      // local session does.
      popts.node_to_loc = [loc = popts.default_location](const Node&) -> Result<std::string> { return loc; };
    }
    AF_ASSIGN_OR_RETURN(Partitions parts, partition(graph_, popts));
    std::map<std::string, const TaskAddress*> by_task;
    for (auto& t : tasks_) by_task[t.task] = &t;
    auto k = std::make_shared<Kind>();
    k->graph_version = graph_.version();
    k->meta_location = parts.location_of;
    std::vector<std::pair<std::string, std::string>> peers;
    std::map<std::string, const TaskAddress*> daemon_of;
    for (auto& [loc, pg] : parts.graphs) {
      AF_ASSIGN_OR_RETURN(DeviceName d, parse_device_name(loc));
      auto t = by_task.find(d.task_name());
      if (t == by_task.end()) {
        std::string node;
        for (auto& [n, l] : parts.location_of)
          if (l == loc) { node = n; break; }
        return invalid_argument("node '" + node + "' is placed on " + d.task_name() +
                                ", which the cluster target '" + opts_.target + "' does not list");
      }
      daemon_of[loc] = t->second;
      peers.emplace_back(loc, t->second->address());
    }
    uint64_t session = session_base_ + (++kinds_made_);
    for (auto& [loc, pg] : parts.graphs) {
      const TaskAddress& t = *daemon_of.at(loc);
      RegisterGraphMsg m;
      m.graph_def = pg->serialize();
      m.location = loc;
      m.session = session;
      m.peers = peers;
      m.edge_capacity = opts_.edge_capacity;
      m.variable_scope = session_base_;
      m.container = opts_.shared_container;
      Part p;
      AF_ASSIGN_OR_RETURN(p.worker, worker_for(loc, t, deadline));
      auto h = p.worker->register_partition(std::move(m), deadline);
      if (!h.ok()) return h.status().with_context("registering the partition for " + loc + " on " + p.worker->label());
      p.handle = *h;
      k->parts[loc] = std::move(p);
    }
    return k;
  }

  // The session's worker for `loc` (mu_ held): the one it has, or a new one when there is
  // none or its daemon went away (maybe restarted since).
  Result<std::shared_ptr<WorkerInterface>> worker_for(const std::string& loc, const TaskAddress& t,
                                                      Clock::time_point deadline) {
    auto& w = workers_[loc];
    if (w && w->alive()) return w;
    w.reset();
    AF_ASSIGN_OR_RETURN(w, connect_worker(t.host, t.port, token_, "af://" + t.address() + " (" + t.task + ")", deadline));
    return w;
  }

  Graph& graph_;
  SessionOptions opts_;
  std::vector<TaskAddress> tasks_;
  std::string token_;
  bool one_daemon_ = false;
  std::mutex mu_;
  std::mutex step_mu_;
  std::map<std::string, std::shared_ptr<WorkerInterface>> workers_;  // location -> its worker
  std::map<std::string, std::shared_ptr<Kind>> kinds_;
  uint64_t session_base_ = 0;
  uint64_t kinds_made_ = 0;
  bool closed_ = false;
  std::atomic<uint64_t> next_step_{1};
};

}  // namespace

Result<std::unique_ptr<SessionImpl>> make_cluster_session(Graph& g, const SessionOptions& opts) {
  AF_ASSIGN_OR_RETURN(std::vector<TaskAddress> tasks, parse_cluster_target(opts.target));
  // A client without a token can still reach an --insecure daemon.
  auto token = load_token();
  if (!token.ok() && token.status().code() != Code::not_found) return token.status();
  bool one_daemon = tasks.size() == 1 && opts.target.find('=') == std::string::npos;
  auto s = std::make_unique<ClusterSession>(g, opts, std::move(tasks), token.ok() ? *token : std::string(), one_daemon);
  AF_RETURN_IF_ERROR(s->open());
  return std::unique_ptr<SessionImpl>(std::move(s));
}

namespace {
const bool registered = [] {
  register_session_factory("remote", make_cluster_session);
  return true;
}();
}  // namespace

}  // namespace actorflow::net
