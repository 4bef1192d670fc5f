// The "local" session backend: the session's graph is one partition without a
// rendezvous (partition.h), run with the process's CPU pool: one executor (a set of node
// actors) per kind of step, and the session's variables.
#include <atomic>

#include "actorflow/session.h"
#include "partition.h"

namespace actorflow::runtime {
namespace {

class LocalSession final : public SessionImpl {
 public:
  LocalSession(Graph& g, const SessionOptions& opts) : partition_(g, opts) {}
  ~LocalSession() override { (void)close(); }

  Status check() const { return check_kernels(partition_.graph(), DeviceType::CPU); }

  Result<std::vector<Tensor>> run(const RunRequest& req) override {
    AF_ASSIGN_OR_RETURN(std::shared_ptr<Executor> ex, partition_.executor(req));
    std::vector<Tensor> feeds;
    feeds.reserve(req.feeds.size());
    for (auto& [out, value] : req.feeds) {
      AF_RETURN_IF_ERROR(validate_feed(out, value));
      feeds.push_back(value);
    }
    return run_step(*ex, feeds, req.options);
  }

  Result<std::shared_ptr<PreparedStep>> prepare(const RunRequest& req) override {
    AF_ASSIGN_OR_RETURN(std::shared_ptr<Executor> ex, partition_.executor(req));
    std::vector<Output> fed;
    for (auto& [out, value] : req.feeds) fed.push_back(out);
    return std::shared_ptr<PreparedStep>(std::make_shared<Prepared>(this, std::move(ex), std::move(fed)));
  }

  Status close() override { return partition_.close(); }

 private:
  // Within the run's or the session's deadline.
  Result<std::vector<Tensor>> run_step(Executor& ex, const std::vector<Tensor>& feeds, const RunOptions& options) {
    int64_t timeout_ms = options.timeout_ms > 0 ? options.timeout_ms : partition_.options().step_timeout_ms;
    return partition_.run_step(ex, feeds, ++global_step_, timeout_ms);
  }

  // A callable's step: it holds its executor, so the LRU never evicts it (use count > 1),
  // and it checks only the feeds' dtypes and shapes per call.
  class Prepared final : public PreparedStep {
   public:
    Prepared(LocalSession* session, std::shared_ptr<Executor> ex, std::vector<Output> fed)
        : session_(session), ex_(std::move(ex)), fed_(std::move(fed)) {}
    Result<std::vector<Tensor>> run(const std::vector<Tensor>& feeds, const RunOptions& options) override {
      for (size_t i = 0; i < feeds.size(); ++i) AF_RETURN_IF_ERROR(validate_feed(fed_[i], feeds[i]));
      return session_->run_step(*ex_, feeds, options);
    }

   private:
    LocalSession* session_;
    std::shared_ptr<Executor> ex_;
    std::vector<Output> fed_;
  };

  Partition partition_;
  std::atomic<int64_t> global_step_{0};
};

struct Registration {
  Registration() {
    register_session_factory("local", [](Graph& g, const SessionOptions& o) -> Result<std::unique_ptr<SessionImpl>> {
      auto s = std::make_unique<LocalSession>(g, o);
      AF_RETURN_IF_ERROR(s->check());
      return std::unique_ptr<SessionImpl>(std::move(s));
    });
  }
} registration;

}  // namespace
}  // namespace actorflow::runtime
