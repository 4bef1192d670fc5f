// Kernels: the code that runs an op on one device, registered per (op, device) with
// AF_REGISTER_KERNEL, as TF's REGISTER_KERNEL_BUILDER. A kernel object is created once
// per node when a session is prepared and reused for every step.
#pragma once
#include "actorflow/api.h"
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "actorflow/device.h"
#include "actorflow/graph.h"

AF_PUBLIC_BEGIN

namespace actorflow {

class ResourceMgr;

// A device as kernels see it: where to allocate and how to parallelize. CPU devices
// hand out an Eigen::ThreadPoolDevice through native_handle(); a GPU device a stream.
class DeviceContext {
 public:
  virtual ~DeviceContext() = default;
  virtual DeviceId id() const = 0;
  virtual Allocator* allocator() const = 0;
  virtual int num_threads() const = 0;
  // Runs fn over [0, n) in shards; cost_per_unit (ns, rough) decides how many shards.
  virtual void parallel_for(int64_t n, int64_t cost_per_unit,
                            const std::function<void(int64_t begin, int64_t end)>& fn) const = 0;
  virtual void* native_handle() const = 0;
};

// What a step's _Send and _Recv kernels exchange tensors through when a graph is cut over
// several tasks (TF's OpKernelContext::rendezvous()): the runtime's partition executor
// hands its own to every kernel context of its steps; elsewhere there is none.
class Rendezvous {
 public:
  virtual ~Rendezvous() = default;
};

class OpKernelContext {
 public:
  OpKernelContext(const Node& node, std::vector<Tensor> inputs, DeviceContext* device,
                  ResourceMgr* resources, int64_t step_id)
      : node_(node), inputs_(std::move(inputs)), device_(device), resources_(resources), step_id_(step_id) {
    outputs_.resize(static_cast<size_t>(node.num_outputs()));
  }

  const Node& node() const { return node_; }
  int num_inputs() const { return static_cast<int>(inputs_.size()); }
  const Tensor& input(int i) const { return inputs_[static_cast<size_t>(i)]; }
  // Moves input i out (lets a kernel reuse the buffer when it is the only owner).
  Tensor take_input(int i) { return std::move(inputs_[static_cast<size_t>(i)]); }
  int num_outputs() const { return static_cast<int>(outputs_.size()); }

  // Allocates output i on this kernel's device.
  Tensor& allocate_output(int i, DType dtype, Shape shape);
  void set_output(int i, Tensor t) { outputs_[static_cast<size_t>(i)] = std::move(t); }
  Tensor& output(int i) { return outputs_[static_cast<size_t>(i)]; }
  std::vector<Tensor>& outputs() { return outputs_; }

  DeviceContext* device() const { return device_; }
  ResourceMgr* resources() const { return resources_; }
  int64_t step_id() const { return step_id_; }
  // The step's rendezvous, null outside a partition of a cut graph.
  Rendezvous* rendezvous() const { return rendezvous_; }
  void set_rendezvous(Rendezvous* r) { rendezvous_ = r; }

  // Records a failure; the message gets the node's name and op prefixed.
  void fail(const Status& s);
  // Shorthand: fail with invalid_argument.
  void fail(const std::string& message) { fail(invalid_argument(message)); }
  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }

 private:
  const Node& node_;
  std::vector<Tensor> inputs_;
  std::vector<Tensor> outputs_;
  DeviceContext* device_;
  ResourceMgr* resources_;
  int64_t step_id_;
  Rendezvous* rendezvous_ = nullptr;
  Status status_;
};

class AsyncOpKernel;

class OpKernel {
 public:
  explicit OpKernel(const Node& node) : name_(node.name), op_(node.op) {}
  virtual ~OpKernel() = default;
  virtual void compute(OpKernelContext& ctx) = 0;
  // Non-null for kernels that finish later (a GPU stream, an I/O wait).
  virtual AsyncOpKernel* as_async() { return nullptr; }
  const std::string& name() const { return name_; }
  const std::string& op() const { return op_; }

 private:
  std::string name_;
  std::string op_;
};

// A kernel that starts its work and returns; `done` is called (from any thread) once
// the outputs in ctx are set. The runtime never blocks a scheduler thread on it: the
// node actor handles other messages until done arrives.
class AsyncOpKernel : public OpKernel {
 public:
  using OpKernel::OpKernel;
  using DoneCallback = std::function<void()>;
  virtual void compute_async(OpKernelContext& ctx, DoneCallback done) = 0;
  // For synchronous executors: starts the work and waits for it.
  void compute(OpKernelContext& ctx) override;
  AsyncOpKernel* as_async() override { return this; }
};

using KernelFactory = std::function<Result<std::unique_ptr<OpKernel>>(const Node&)>;

class KernelRegistry {
 public:
  static KernelRegistry& global();
  void add(const std::string& op, DeviceType device, KernelFactory factory);
  bool has(const std::string& op, DeviceType device) const;
  // A clear error if the op has no kernel for the device.
  Result<std::unique_ptr<OpKernel>> create(const Node& node, DeviceType device) const;

 private:
  std::map<std::pair<std::string, DeviceType>, KernelFactory> factories_;
};

struct KernelRegistrar {
  KernelRegistrar(const std::string& op, DeviceType device, KernelFactory f) {
    KernelRegistry::global().add(op, device, std::move(f));
  }
};

}  // namespace actorflow

// The kernel class needs a constructor taking (const Node&) that does not throw; a node
// it cannot run (a bad attribute) is reported by compute(), through ctx.fail(), naming
// the node, when a step first runs it.
#define AF_REGISTER_KERNEL(op, device, Class)                                                   \
  static ::actorflow::KernelRegistrar AF_CONCAT(af_kernel_registrar_, __COUNTER__)(              \
      op, device, [](const ::actorflow::Node& n) -> ::actorflow::Result<std::unique_ptr<::actorflow::OpKernel>> { \
        return std::unique_ptr<::actorflow::OpKernel>(new Class(n));                             \
      })

AF_PUBLIC_END
