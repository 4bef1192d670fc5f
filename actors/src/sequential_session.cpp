// The reference evaluator: runs a step's nodes one after another on the calling thread.
// It is the plain baseline the actor runtime is checked against, and the "sequential"
// session backend.
#include <map>
#include <memory>
#include <mutex>

#include "actorflow/denormal.h"
#include "actorflow/kernel.h"
#include "actorflow/ops/cpu_device.h"
#include "actorflow/resource_mgr.h"
#include "actorflow/runtime/step_plan.h"
#include "actorflow/session.h"

namespace actorflow {
namespace {

class SequentialSession final : public SessionImpl {
 public:
  SequentialSession(Graph& g, const SessionOptions& opts) : graph_(g), device_(opts.intra_op_threads) {}

  Result<std::vector<Tensor>> run(const RunRequest& req) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) return failed_precondition("session is closed");
    AF_ASSIGN_OR_RETURN(StepPlan plan, make_step_plan(graph_, req));
    std::map<Endpoint, Tensor> values;
    for (size_t i = 0; i < req.feeds.size(); ++i) {
      AF_RETURN_IF_ERROR(validate_feed(req.feeds[i].first, req.feeds[i].second));
      values[plan.feeds[i]] = req.feeds[i].second;
    }
    int64_t step = ++step_id_;
    for (int id : plan.nodes) {
      const Node& node = graph_.node(id);
      AF_ASSIGN_OR_RETURN(OpKernel * kernel, kernel_for(node));
      std::vector<Tensor> inputs;
      inputs.reserve(node.inputs.size());
      for (auto& e : node.inputs) inputs.push_back(values.at(e));
      OpKernelContext ctx(node, std::move(inputs), &device_, &resources_, step);
      try {
        ScopedFlushDenormal flush;
        kernel->compute(ctx);
      } catch (...) {
        ctx.fail(status_from_current_exception());
      }
      if (!ctx.ok()) return ctx.status();
      AF_RETURN_IF_ERROR(check_outputs(node, ctx.outputs()));
      for (int i = 0; i < node.num_outputs(); ++i) values[{id, i}] = std::move(ctx.output(i));
    }
    std::vector<Tensor> out;
    for (auto& e : plan.fetches) out.push_back(e.node < 0 ? Tensor() : values.at(e));
    return out;
  }

  Status close() override {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
    kernels_.clear();
    return Status::OK();
  }

  Status check() const { return check_kernels(graph_, DeviceType::CPU); }

 private:
  Result<OpKernel*> kernel_for(const Node& node) {
    auto it = kernels_.find(node.id);
    if (it != kernels_.end()) return it->second.get();
    AF_ASSIGN_OR_RETURN(std::unique_ptr<OpKernel> k, KernelRegistry::global().create(node, DeviceType::CPU));
    OpKernel* raw = k.get();
    kernels_[node.id] = std::move(k);
    return raw;
  }

  Graph& graph_;
  CpuDevice device_;
  ResourceMgr resources_;
  std::mutex mu_;
  std::map<int, std::unique_ptr<OpKernel>> kernels_;
  int64_t step_id_ = 0;
  bool closed_ = false;
};

struct Registration {
  Registration() {
    register_session_factory("sequential", [](Graph& g, const SessionOptions& o) -> Result<std::unique_ptr<SessionImpl>> {
      auto s = std::make_unique<SequentialSession>(g, o);
      AF_RETURN_IF_ERROR(s->check());
      return std::unique_ptr<SessionImpl>(std::move(s));
    });
  }
} registration;

}  // namespace
}  // namespace actorflow
