// Builds with CUDA: the GPU API of gpu.h and cuda_info.h, forwarded to the CUDA module
// (ops/common/gpu_module.h), which is loaded on first use and only on a machine with an
// NVIDIA device node. Until then (and for ever on a machine without a GPU) no CUDA
// library is mapped into the process.
#ifdef AF_WITH_CUDA
#include <dlfcn.h>
#include "actorflow/environment.h"
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <set>

#include "actorflow/ops/cuda_info.h"
#include "common/gpu_module.h"
#include "common/gpu_training_ops.h"

namespace actorflow::gpu {
namespace {

struct Loaded {
  const GpuModule* module = nullptr;
  std::string why;  // why there is no module
};

std::atomic<bool> g_loaded{false};

// The device nodes of NVIDIA's kernel driver (WSL 2: /dev/dxg). Without one, CUDA can see
// no GPU, so the module and CUDA's libraries stay unloaded.
bool nvidia_device_node() {
  for (const char* p : {"/dev/nvidiactl", "/dev/nvidia0", "/dev/dxg"})
    if (::access(p, F_OK) == 0) return true;
  return false;
}

// The module beside this library (its real folder, found from one of its own symbols);
// else the bare file name, for the dynamic loader's search path.
std::string default_module_path() {
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void*>(&default_module_path), &info) != 0 && info.dli_fname) {
    std::string self = info.dli_fname;
    const size_t slash = self.rfind('/');
    if (slash != std::string::npos) return self.substr(0, slash + 1) + kGpuModuleFile;
  }
  return kGpuModuleFile;
}

Loaded load() {
  Loaded l;
  const char* env = environment_switch(EnvironmentSwitch::gpu_module);
  const std::string choice = env ? env : "";
  if (choice == "off" || choice == "0") {
    l.why = "GPU support is switched off ($AF_GPU_MODULE=" + choice + ")";
    return l;
  }
  // A module named by path is loaded as asked (CUDA itself then finds no GPU, or one).
  if (choice.empty() && !nvidia_device_node()) {
    l.why = "this machine has no NVIDIA GPU device (no /dev/nvidiactl, /dev/nvidia0 or /dev/dxg)";
    return l;
  }
  const std::string path = choice.empty() ? default_module_path() : choice;
  // RTLD_LOCAL: CUDA's symbols stay out of the process's global scope.
  void* h = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* e = ::dlerror();
    l.why = "cannot load ActorFlow's CUDA module " + path + ": " + (e ? e : "unknown error") +
            " (CUDA 13's libcudart and libcublasLt must be on the library path)";
  } else if (auto* entry = reinterpret_cast<const GpuModule* (*)()>(::dlsym(h, "af_gpu_module")); !entry) {
    l.why = path + " is not ActorFlow's CUDA module (no af_gpu_module)";
  } else if (const GpuModule* m = entry(); !m || m->abi != kGpuModuleAbi) {
    l.why = path + " belongs to another build of ActorFlow (module ABI " + std::to_string(m ? m->abi : -1) +
            ", this library's " + std::to_string(kGpuModuleAbi) + ")";
  } else {
    // Every op the registry promised a GPU kernel for must be in the module, and back.
    const std::vector<std::string> ops = m->kernel_ops();
    const std::set<std::string> have(ops.begin(), ops.end());
    std::set<std::string> listed(std::begin(kGpuKernelOps), std::end(kGpuKernelOps));
    listed.insert(std::begin(kGpuTrainingKernelOps), std::end(kGpuTrainingKernelOps));
    for (const std::string& op : listed)
      if (!have.count(op)) std::cerr << "actorflow: the CUDA module has no GPU kernel for " << op << "\n";
    for (const std::string& op : have)
      if (!listed.count(op))
        std::cerr << "actorflow: the CUDA module's GPU kernel for " << op
                  << " is not in kGpuKernelOps (ops/common/gpu_module.h): the registry does not offer it\n";
    l.module = m;
    g_loaded = true;
    return l;  // the handle stays open for the life of the process
  }
  // A machine with a GPU whose module does not load should hear why once, not see 0 GPUs.
  std::cerr << "actorflow: no GPU support: " << l.why << "\n";
  return l;
}

const Loaded& loaded() {
  static const Loaded l = load();  // once, thread-safe
  return l;
}

Result<std::unique_ptr<OpKernel>> create_gpu_kernel(const Node& n) {
  std::string why;
  const GpuModule* m = gpu_module(&why);
  if (!m) return Status(Code::unavailable, "node '" + n.name + "' (" + n.op + "): no GPU kernels in this process: " + why);
  return m->create_kernel(n);
}

struct RegisterGpuKernels {
  RegisterGpuKernels() {
    for (const char* op : kGpuKernelOps) KernelRegistry::global().add(op, DeviceType::GPU, create_gpu_kernel);
    for (const char* op : kGpuTrainingKernelOps) KernelRegistry::global().add(op, DeviceType::GPU, create_gpu_kernel);
  }
} register_gpu_kernels;

Status no_gpu(int index, const std::string& why) {
  return Status(Code::unavailable, "no GPU " + std::to_string(index) + ": " + why);
}

}  // namespace

const GpuModule* gpu_module(std::string* why) {
  const Loaded& l = loaded();
  if (!l.module && why) *why = l.why;
  return l.module;
}

}  // namespace actorflow::gpu

namespace actorflow {

using gpu::gpu_module;

bool built_with_cuda() { return true; }

bool cuda_module_loaded() { return gpu::g_loaded.load(); }

int cuda_device_count() {
  const gpu::GpuModule* m = gpu_module();
  return m ? m->device_count() : 0;
}

std::string cuda_device_name(int index) {
  const gpu::GpuModule* m = gpu_module();
  return m ? m->device_name(index) : "none";
}

Status cuda_self_test(int index) {
  std::string why;
  const gpu::GpuModule* m = gpu_module(&why);
  return m ? m->self_test(index) : gpu::no_gpu(index, why);
}

Result<DeviceContext*> gpu_device_context(int index) {
  std::string why;
  const gpu::GpuModule* m = gpu_module(&why);
  if (!m) return gpu::no_gpu(index, why);
  return m->device_context(index);
}

Result<GpuMemoryStats> gpu_memory_stats(int index) {
  std::string why;
  const gpu::GpuModule* m = gpu_module(&why);
  if (!m) return gpu::no_gpu(index, why);
  return m->memory_stats(index);
}

Result<std::shared_ptr<NcclGroup>> nccl_group(std::shared_ptr<CollectiveGroup> host, const NcclGroupOptions& options) {
  std::string why;
  const gpu::GpuModule* m = gpu_module(&why);
  if (!m) return gpu::no_gpu(options.gpu, why);
  return m->nccl_group(std::move(host), options);
}

}  // namespace actorflow
#endif
