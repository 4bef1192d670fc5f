#include "actorflow/session.h"

#include <map>
#include <mutex>

#include "actorflow/dsl_core.h"

namespace actorflow {
namespace {

std::mutex& factories_mu() {
  static std::mutex mu;
  return mu;
}
std::map<std::string, SessionFactory>& factories() {
  static auto* f = new std::map<std::string, SessionFactory>();
  return *f;
}

Result<std::unique_ptr<SessionImpl>> make_impl(Graph& graph, const SessionOptions& options) {
  std::string kind;
  if (!options.target.empty()) kind = "remote";
  else if (!options.executor.empty()) kind = options.executor;
  else kind = "local";
  SessionFactory f;
  {
    std::lock_guard<std::mutex> lock(factories_mu());
    auto it = factories().find(kind);
    if (it == factories().end() && kind == "local") it = factories().find("sequential");
    if (it == factories().end())
      return not_found("no session backend '" + kind + "' is linked into this program");
    f = it->second;
  }
  return f(graph, options);
}

}  // namespace

void register_session_factory(const std::string& name, SessionFactory factory) {
  std::lock_guard<std::mutex> lock(factories_mu());
  factories()[name] = std::move(factory);
}

Session::Session(Graph& graph, std::unique_ptr<SessionImpl> impl) : graph_(&graph), impl_(std::move(impl)) {}

Result<Session> Session::create(Graph& graph, SessionOptions options) {
  auto impl = make_impl(graph, options);
  if (!impl.ok()) return impl.status();
  return Session(graph, std::move(impl).value());
}

Result<Session> Session::create(Graph& graph, const std::string& target, SessionOptions options) {
  options.target = target;
  return create(graph, std::move(options));
}

Session::Session(Session&& other) noexcept : graph_(other.graph_), impl_(std::move(other.impl_)) {}

Session& Session::operator=(Session&& other) noexcept {
  if (this != &other) {
    if (impl_) (void)impl_->close();
    graph_ = other.graph_;
    impl_ = std::move(other.impl_);
  }
  return *this;
}

Session::~Session() {
  if (impl_) (void)impl_->close();
}

Result<std::vector<Tensor>> Session::run(const std::vector<Fetch>& fetches, const FeedDict& feeds,
                                         const std::vector<Operation>& targets) {
  return run(RunOptions{}, fetches, feeds, targets);
}

namespace {

// A fetched tensor is the caller's: one that still shares its buffer (a variable's value,
// a constant) is copied, so a later update that writes a variable in place (a sparse
// apply) never changes what an earlier run returned. Fresh results are not copied, nor
// is a fed tensor handed back (an Identity of a feed): its buffer is the caller's own,
// and no variable ever takes a fed buffer (Assign copies).
template <class FedTensor>
Result<std::vector<Tensor>> owned(Result<std::vector<Tensor>> r, const std::vector<FedTensor>& feeds,
                                  const Tensor& (*value)(const FedTensor&)) {
  if (!r.ok()) return r;
  for (Tensor& t : *r) {
    if (!t.valid() || t.buffer_use_count() <= 1) continue;
    bool fed = false;
    for (const FedTensor& f : feeds) fed = fed || t.shares_buffer_with(value(f));
    if (!fed) t = t.clone();
  }
  return r;
}

const Tensor& fed_value(const std::pair<Output, Tensor>& f) { return f.second; }
const Tensor& fed_value(const Tensor& t) { return t; }

}  // namespace

Result<std::vector<Tensor>> Session::run(const RunOptions& options, const std::vector<Fetch>& fetches,
                                         const FeedDict& feeds, const std::vector<Operation>& targets) {
  if (!impl_) return failed_precondition("session is closed");
  for (auto& f : fetches) AF_RETURN_IF_ERROR(graph_->check_owns(f.output, f.is_op ? "a fetched op" : "a fetch"));
  for (auto& [o, t] : feeds) AF_RETURN_IF_ERROR(graph_->check_owns(o, "a feed"));
  for (auto& op : targets) AF_RETURN_IF_ERROR(graph_->check_owns(op, "a target"));
  RunRequest req{fetches, feeds, targets, options};
  return owned(impl_->run(req), feeds, &fed_value);
}

Result<Callable> Session::make_callable(const std::vector<Fetch>& fetches, const std::vector<Output>& feeds,
                                        const std::vector<Operation>& targets) {
  if (!impl_) return failed_precondition("session is closed");
  for (auto& f : fetches) AF_RETURN_IF_ERROR(graph_->check_owns(f.output, f.is_op ? "a fetched op" : "a fetch"));
  for (auto& o : feeds) AF_RETURN_IF_ERROR(graph_->check_owns(o, "a feed"));
  for (auto& op : targets) AF_RETURN_IF_ERROR(graph_->check_owns(op, "a target"));
  RunRequest req;
  req.fetches = fetches;
  req.targets = targets;
  for (auto& o : feeds) req.feeds.emplace_back(o, Tensor());
  AF_ASSIGN_OR_RETURN(std::shared_ptr<PreparedStep> step, impl_->prepare(req));
  return Callable(std::move(step), feeds.size());
}

Result<std::vector<Tensor>> Callable::operator()(const std::vector<Tensor>& feeds, const RunOptions& options) const {
  if (!step_) return failed_precondition("calling an empty Callable (make one with Session::make_callable)");
  if (feeds.size() != num_feeds_)
    return invalid_argument("the callable takes " + std::to_string(num_feeds_) + " feed(s), got " +
                            std::to_string(feeds.size()));
  return owned(step_->run(feeds, options), feeds, &fed_value);
}

namespace {

// The default preparation: the request kept, its feed values filled in on each call.
class WholeRequestStep final : public PreparedStep {
 public:
  WholeRequestStep(SessionImpl* impl, RunRequest req) : impl_(impl), req_(std::move(req)) {}
  Result<std::vector<Tensor>> run(const std::vector<Tensor>& feeds, const RunOptions& options) override {
    RunRequest req = req_;
    for (size_t i = 0; i < feeds.size(); ++i) req.feeds[i].second = feeds[i];
    req.options = options;
    return impl_->run(req);
  }

 private:
  SessionImpl* impl_;
  RunRequest req_;
};

}  // namespace

Result<std::shared_ptr<PreparedStep>> SessionImpl::prepare(const RunRequest& request) {
  return std::shared_ptr<PreparedStep>(std::make_shared<WholeRequestStep>(this, request));
}

Result<Tensor> Session::eval(const Output& fetch, const FeedDict& feeds) {
  auto r = run(std::vector<Fetch>{fetch}, feeds);
  if (!r.ok()) return r.status();
  return std::move(r->front());
}

Status Session::run_init() {
  const auto& inits = graph_->collection("init_ops");
  if (inits.empty()) return Status::OK();
  std::vector<Operation> targets;
  for (int id : inits) targets.emplace_back(graph_, id);
  return run({}, {}, targets).status();
}

Status Session::close() {
  if (!impl_) return Status::OK();
  return impl_->close();
}

}  // namespace actorflow
