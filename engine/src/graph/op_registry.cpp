#include "actorflow/op_registry.h"

#include "actorflow/kernel.h"

#include <condition_variable>
#include <mutex>

namespace actorflow {

OpRegistry& OpRegistry::global() {
  static OpRegistry* r = new OpRegistry();
  return *r;
}

Status OpRegistry::add(OpDef def) {
  if (defs_.count(def.name)) return Status(Code::already_exists, "op '" + def.name + "' registered twice");
  std::string name = def.name;
  defs_[name] = std::make_unique<OpDef>(std::move(def));
  return Status::OK();
}

const OpDef* OpRegistry::find(const std::string& name) const {
  auto it = defs_.find(name);
  return it == defs_.end() ? nullptr : it->second.get();
}

std::vector<std::string> OpRegistry::names() const {
  std::vector<std::string> v;
  for (auto& [k, d] : defs_) v.push_back(k);
  return v;
}

OpRegistrar::OpRegistrar(OpDefBuilder& b) {
  Status s = OpRegistry::global().add(std::move(b.def()));
  if (!s.ok()) throw Error(s);  // a duplicate registration is a build defect
}

// ---- ShapeContext ----

DType ShapeContext::input_dtype(int i) const {
  const Endpoint& e = node_.inputs[static_cast<size_t>(i)];
  return graph_.node(e.node).output_dtypes[static_cast<size_t>(e.index)];
}

const Shape& ShapeContext::input_shape(int i) const {
  const Endpoint& e = node_.inputs[static_cast<size_t>(i)];
  return graph_.node(e.node).output_shapes[static_cast<size_t>(e.index)];
}

std::string ShapeContext::describe_input(int i) const {
  const Endpoint& e = node_.inputs[static_cast<size_t>(i)];
  const Node& p = graph_.node(e.node);
  std::string n = p.name + (e.index ? ":" + std::to_string(e.index) : "");
  return "'" + n + "' (" + dtype_name(input_dtype(i)) + input_shape(i).to_string() + ")";
}

const Tensor* ShapeContext::input_constant(int i) const {
  const Endpoint& e = node_.inputs[static_cast<size_t>(i)];
  const Node& p = graph_.node(e.node);
  if (p.op != "Const") return nullptr;
  return p.attr_tensor("value");
}

void ShapeContext::set_output(int i, DType dtype, Shape shape) {
  size_t k = static_cast<size_t>(i);
  if (node_.output_dtypes.size() <= k) {
    node_.output_dtypes.resize(k + 1, DType::invalid);
    node_.output_shapes.resize(k + 1);
  }
  node_.output_dtypes[k] = dtype;
  node_.output_shapes[k] = std::move(shape);
}

Status ShapeContext::error(const std::string& message) const {
  return invalid_argument(node_.op + " '" + node_.name + "': " + message);
}

// ---- kernels ----

KernelRegistry& KernelRegistry::global() {
  static KernelRegistry* r = new KernelRegistry();
  return *r;
}

void KernelRegistry::add(const std::string& op, DeviceType device, KernelFactory factory) {
  factories_[{op, device}] = std::move(factory);
}

bool KernelRegistry::has(const std::string& op, DeviceType device) const {
  return factories_.count({op, device}) != 0;
}

Result<std::unique_ptr<OpKernel>> KernelRegistry::create(const Node& node, DeviceType device) const {
  auto it = factories_.find({node.op, device});
  if (it == factories_.end()) {
    if (!OpRegistry::global().find(node.op))
      return not_found("node '" + node.name + "': unknown op '" + node.op + "'");
    return not_found("node '" + node.name + "': no " + device_type_name(device) + " kernel registered for op '" + node.op + "'");
  }
  return it->second(node);
}

void AsyncOpKernel::compute(OpKernelContext& ctx) {
  std::mutex mu;
  std::condition_variable cv;
  bool finished = false;
  compute_async(ctx, [&] {
    std::lock_guard<std::mutex> lock(mu);
    finished = true;
    cv.notify_one();
  });
  std::unique_lock<std::mutex> lock(mu);
  cv.wait(lock, [&] { return finished; });
}

Tensor& OpKernelContext::allocate_output(int i, DType dtype, Shape shape) {
  Tensor& t = outputs_[static_cast<size_t>(i)];
  t = Tensor(dtype, std::move(shape), device_ ? device_->allocator() : cpu_allocator());
  return t;
}

void OpKernelContext::fail(const Status& s) {
  if (status_.ok()) status_ = s.with_context(node_.op + " '" + node_.name + "'");
}

}  // namespace actorflow
