// The entry point of libactorflow_cuda.so (ops/common/gpu_module.h): the table that
// libactorflow forwards the GPU API and GPU kernel creation to.
#include <map>
#include <mutex>

#include "common/gpu_module.h"
#include "cuda/gpu_runtime.h"

namespace actorflow::gpu {

// cuda_info.cu and gpu_device.cpp.
int module_device_count();
std::string module_device_name(int index);
Status module_self_test(int index);
Result<DeviceContext*> module_device_context(int index);
Result<GpuMemoryStats> module_memory_stats(int index);
// gpu_nccl.cpp.
Result<std::shared_ptr<NcclGroup>> module_nccl_group(std::shared_ptr<CollectiveGroup> host, const NcclGroupOptions& o);

namespace {

// Filled by the static registrars of this module while it is loaded; read-only after.
std::map<std::string, KernelFactory>& kernels() {
  static auto* k = new std::map<std::string, KernelFactory>();
  return *k;
}

Result<std::unique_ptr<OpKernel>> create_kernel(const Node& n) {
  auto it = kernels().find(n.op);
  if (it == kernels().end())
    return not_found("node '" + n.name + "': no GPU kernel registered for op '" + n.op + "' in the CUDA module");
  return it->second(n);
}

std::vector<std::string> kernel_ops() {
  std::vector<std::string> ops;
  for (const auto& [op, f] : kernels()) ops.push_back(op);
  return ops;
}

}  // namespace

void register_module_kernel(const std::string& op, KernelFactory factory) { kernels()[op] = std::move(factory); }

}  // namespace actorflow::gpu

extern "C" __attribute__((visibility("default"))) const actorflow::gpu::GpuModule* af_gpu_module() {
  namespace g = actorflow::gpu;
  static const g::GpuModule m = [] {
    g::GpuModule t;
    t.device_count = g::module_device_count;
    t.device_name = g::module_device_name;
    t.self_test = g::module_self_test;
    t.device_context = g::module_device_context;
    t.memory_stats = g::module_memory_stats;
    t.create_kernel = g::create_kernel;
    t.kernel_ops = g::kernel_ops;
    t.nccl_group = g::module_nccl_group;
    return t;
  }();
  return &m;
}
