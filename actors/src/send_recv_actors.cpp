// The _Send and _Recv nodes of a partition (ops/defs/sendrecv_ops.cpp). Each runs in its
// own node actor as an async kernel, so a node waiting for a remote credit or tensor
// blocks no scheduler thread: the actor keeps its later steps queued (steps fire in
// order) until the rendezvous calls back. They find their partition's EdgeRendezvous in
// their kernel context, where the partition executor puts it.
#include "actorflow/kernel.h"
#include "actorflow/runtime/remote_edges.h"
#include "actorflow/tensor_codec.h"

namespace actorflow::runtime {
namespace {

struct EdgeAttrs {
  explicit EdgeAttrs(const Node& n)
      : tensor_name(n.attr_string("tensor_name")), edge(n.attr_int("edge_id", -1)),
        send_task(n.attr_string("send_task")), recv_task(n.attr_string("recv_task")) {}
  std::string tensor_name;
  int64_t edge;
  std::string send_task, recv_task;

  std::shared_ptr<EdgeRendezvous> find(OpKernelContext& ctx) const {
    auto* edges = dynamic_cast<EdgeRendezvous*>(ctx.rendezvous());
    std::shared_ptr<EdgeRendezvous> r = edges ? edges->shared_from_this() : nullptr;
    if (!r) ctx.fail(Status(Code::failed_precondition, "edge " + tensor_name +
                                                          " has no rendezvous: a partition runs only in a partition executor"));
    return r;
  }
};

class SendKernel final : public AsyncOpKernel {
 public:
  explicit SendKernel(const Node& n) : AsyncOpKernel(n), a_(n) {}

  void compute_async(OpKernelContext& ctx, DoneCallback done) override {
    auto r = a_.find(ctx);
    if (!r) return done();
    // A control edge carries a scalar: only its arrival matters.
    Tensor t = ctx.num_inputs() > 0 ? ctx.input(0) : Tensor::scalar(0.0f);
    int64_t step = ctx.step_id();
    OpKernelContext* c = &ctx;
    r->when_credit(step, a_.edge, [this, r, c, t, step, done](Status s) {
      if (s.ok()) {
        TensorMessage m;
        m.step_id = step;
        m.edge = static_cast<uint32_t>(a_.edge);
        m.producer = a_.tensor_name;
        m.tensor = t;
        s = r->transport().send_edge(a_.recv_task, step, a_.edge, std::move(m));
      }
      if (!s.ok()) c->fail(s.with_context("sending " + a_.tensor_name + " to " + a_.recv_task));
      done();
    });
  }

 private:
  EdgeAttrs a_;
};

class RecvKernel final : public AsyncOpKernel {
 public:
  explicit RecvKernel(const Node& n) : AsyncOpKernel(n), a_(n) {}

  void compute_async(OpKernelContext& ctx, DoneCallback done) override {
    auto r = a_.find(ctx);
    if (!r) return done();
    OpKernelContext* c = &ctx;
    r->when_edge(ctx.step_id(), a_.edge, a_.send_task, [this, c, done](Result<EdgeValue> got) {
      if (!got.ok()) c->fail(got.status().with_context("receiving " + a_.tensor_name + " from " + a_.send_task));
      else if (!got->status.ok()) c->fail(got->status);
      else c->set_output(0, std::move(got->tensor));
      done();
    });
  }

 private:
  EdgeAttrs a_;
};

}  // namespace

AF_REGISTER_KERNEL("_Send", DeviceType::CPU, SendKernel);
AF_REGISTER_KERNEL("_Recv", DeviceType::CPU, RecvKernel);

}  // namespace actorflow::runtime
