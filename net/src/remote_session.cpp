// The "remote" session backend: Session::create(g, "af://host:port") runs the whole graph
// on one node daemon. The graph travels once as GraphDef bytes; steps then travel as
// RunStep frames naming nodes, and tensors as TensorMsg bytes. When a run names a node
// added since, the graph travels again and the daemon appends the new nodes to the
// registered graph (node ids only grow and inputs precede consumers), so its session and
// variables carry on, as a local session's do. After the daemon restarted (a new
// connection: the old handle is gone) the graph is registered afresh, with fresh variables.
//
// Every wait has a deadline: connecting uses the step timeout (or 10 s when none is set),
// and a step waits for its timeout, or without one until the daemon answers or its
// connection dies (heartbeats notice a silent peer). Errors name the daemon's task and
// address; a kernel error keeps the daemon's message, which names the node.
#include <algorithm>
#include <atomic>
#include <mutex>

#include "actorflow/session.h"
#include "actorflow/tensor_codec.h"
#include "cluster_session.h"
#include "connection_client.h"
#include "token.h"

namespace actorflow::net {
namespace {

constexpr int64_t kDefaultConnectTimeoutMs = 10000;

struct Target {
  std::string host;
  uint16_t port = 0;
};

Result<Target> parse_target(const std::string& target) {
  const std::string prefix = "af://";
  auto bad = [&](const std::string& why) {
    return invalid_argument("session target '" + target + "': " + why + " (want af://host:port)");
  };
  if (target.rfind(prefix, 0) != 0) return bad("unknown scheme");
  std::string rest = target.substr(prefix.size());
  while (!rest.empty() && rest.back() == '/') rest.pop_back();
  Target t;
  size_t colon = rest.rfind(':');
  if (colon == std::string::npos || colon == 0) return bad("no port");
  t.host = rest.substr(0, colon);
  if (t.host.size() > 2 && t.host.front() == '[' && t.host.back() == ']') t.host = t.host.substr(1, t.host.size() - 2);
  std::string port = rest.substr(colon + 1);
  if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos) return bad("bad port");
  int p = std::stoi(port);
  if (p < 1 || p > 65535) return bad("port out of range");
  t.port = static_cast<uint16_t>(p);
  return t;
}

class RemoteSession final : public SessionImpl {
 public:
  RemoteSession(Graph& g, const SessionOptions& opts, Target t, std::string token)
      : graph_(g), opts_(opts), target_(std::move(t)), label_(opts.target), token_(std::move(token)) {}

  ~RemoteSession() override { (void)close(); }

  // Connects and registers at once, so that create() fails for a daemon that does not
  // answer or a graph it cannot run.
  Status open() {
    auto deadline = deadline_after(connect_timeout_ms());
    return ready(deadline, graph_.num_nodes() - 1).status();
  }

  Result<std::vector<Tensor>> run(const RunRequest& req) override {
    int64_t timeout_ms = req.options.timeout_ms > 0 ? req.options.timeout_ms : opts_.step_timeout_ms;
    auto deadline = timeout_ms > 0 ? deadline_after(timeout_ms) : DaemonClient::kNoDeadline;
    // Connecting is bounded even when the step is not.
    auto connect_deadline = std::min(deadline, deadline_after(connect_timeout_ms()));
    int newest = -1;
    for (auto& f : req.fetches) newest = std::max(newest, f.output.node_id());
    for (auto& [out, value] : req.feeds) newest = std::max(newest, out.node_id());
    for (auto& op : req.targets) newest = std::max(newest, op.node_id());
    AF_ASSIGN_OR_RETURN(Ready r, ready(connect_deadline, newest));
    RunStepMsg m;
    m.handle = r.handle;
    m.step_id = next_step_++;
    std::vector<int> op_fetches;
    for (size_t i = 0; i < req.fetches.size(); ++i) {
      auto& f = req.fetches[i];
      // An op fetched for its effect runs as a target and yields an empty tensor here.
      if (f.is_op) {
        m.targets.push_back(f.output.node().name);
        op_fetches.push_back(static_cast<int>(i));
      } else {
        m.fetches.push_back(f.output.name());
      }
    }
    for (auto& op : req.targets) m.targets.push_back(op.name());
    for (auto& [out, value] : req.feeds) {
      TensorMessage tm;
      tm.step_id = static_cast<int64_t>(m.step_id);
      tm.producer = out.name();
      tm.tensor = value;
      m.feeds.emplace_back(out.name(), std::move(tm));
    }
    auto done = r.client->run_step(std::move(m), deadline);
    if (!done.ok()) {
      forget(r.client);
      return done.status();
    }
    if (!done->status.ok()) return done->status.with_context("via " + label_);
    std::vector<Tensor> out(req.fetches.size());
    size_t next = 0, next_op = 0;
    for (size_t i = 0; i < out.size(); ++i) {
      if (next_op < op_fetches.size() && op_fetches[next_op] == static_cast<int>(i)) {
        ++next_op;
        continue;
      }
      if (next >= done->fetched.size())
        return data_loss(label_ + " answered " + std::to_string(done->fetched.size()) + " tensors for " +
                         std::to_string(req.fetches.size() - op_fetches.size()) + " fetches");
      TensorMessage& t = done->fetched[next++];
      if (!t.status.ok()) return t.status.with_context("a tensor fetched from " + label_);
      out[i] = std::move(t.tensor);
    }
    return out;
  }

  Status close() override {
    std::shared_ptr<DaemonClient> client;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (closed_) return Status::OK();
      closed_ = true;
      if (client_ && handle_) client_->close_graph(handle_);
      client = std::move(client_);
    }
    // Closing the connection frees its graphs on the daemon in any case.
    client.reset();
    return Status::OK();
  }

 private:
  struct Ready {
    std::shared_ptr<DaemonClient> client;
    uint64_t handle = 0;
  };

  static DaemonClient::Clock::time_point deadline_after(int64_t ms) {
    return DaemonClient::Clock::now() + std::chrono::milliseconds(ms);
  }
  int64_t connect_timeout_ms() const {
    return opts_.step_timeout_ms > 0 ? std::min(opts_.step_timeout_ms, kDefaultConnectTimeoutMs) : kDefaultConnectTimeoutMs;
  }

  // A live connection with a registered graph holding node `newest`: reconnects after
  // the daemon went away, registers again when the graph has grown past what it holds.
  Result<Ready> ready(DaemonClient::Clock::time_point deadline, int newest) {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) return failed_precondition("session is closed");
    if (client_ && !client_->alive()) {
      client_.reset();
      handle_ = 0;
    }
    if (!client_) {
      auto c = DaemonClient::connect(target_.host, target_.port, token_, label_, deadline);
      if (!c.ok()) return c.status();
      client_ = std::shared_ptr<DaemonClient>(std::move(c).value());
    }
    if (handle_ == 0 || newest >= registered_nodes_) {
      int nodes = graph_.num_nodes();
      // A grown graph extends the registered one, keeping the daemon's variables.
      auto h = client_->register_graph(graph_.serialize(), deadline, handle_);
      if (!h.ok()) return h.status().with_context("registering the graph on " + label_);
      handle_ = *h;
      registered_nodes_ = nodes;
    }
    return Ready{client_, handle_};
  }

  // A step failed because the connection did: the next run reconnects.
  void forget(const std::shared_ptr<DaemonClient>& c) {
    std::lock_guard<std::mutex> lock(mu_);
    if (client_ == c && !c->alive()) {
      client_.reset();
      handle_ = 0;
    }
  }

  Graph& graph_;
  SessionOptions opts_;
  Target target_;
  std::string label_;
  std::string token_;
  std::mutex mu_;
  std::shared_ptr<DaemonClient> client_;
  uint64_t handle_ = 0;
  int registered_nodes_ = 0;
  bool closed_ = false;
  std::atomic<uint64_t> next_step_{1};
};

Result<std::unique_ptr<SessionImpl>> make_remote_session(Graph& g, const SessionOptions& opts) {
  // A list of daemons: the graph is cut over them (cluster_session.h).
  if (is_cluster_target(opts.target)) return make_cluster_session(g, opts);
  AF_ASSIGN_OR_RETURN(Target t, parse_target(opts.target));
  // A client without a token can still reach an --insecure daemon.
  auto token = load_token();
  if (!token.ok() && token.status().code() != Code::not_found) return token.status();
  auto s = std::make_unique<RemoteSession>(g, opts, std::move(t), token.ok() ? *token : std::string());
  AF_RETURN_IF_ERROR(s->open());
  return std::unique_ptr<SessionImpl>(std::move(s));
}

const bool registered = [] {
  register_session_factory("remote", make_remote_session);
  return true;
}();

}  // namespace
}  // namespace actorflow::net
