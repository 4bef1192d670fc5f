// Soft placement (gpu_placement.h). Which kernels a GPU has is read from the kernel
// registry; which dtypes they take is fixed here: float32 only for now (copies excepted).
#include "actorflow/ops/gpu_placement.h"

#include <functional>
#include <iostream>
#include <map>

#include "actorflow/device_name.h"
#include "actorflow/kernel.h"
#include "actorflow/ops/cuda_info.h"

namespace actorflow {
namespace {

bool is_copy(const std::string& op) { return op == "_CopyToDevice" || op == "_CopyToHost"; }

bool starts_with(const std::string& s, const char* p) { return s.rfind(p, 0) == 0; }

// The gradient input of a dense Apply op (ops/train/apply_kernels.cpp); -1 for others.
int apply_grad_input(const std::string& op) {
  static const std::map<std::string, int> grad = {
      {"ApplyGradientDescent", 1}, {"ApplyMomentum", 1}, {"ApplyAdagrad", 1}, {"ApplyAdadelta", 3},
      {"ApplyRMSProp", 4},         {"ApplyAdam", 6},     {"ApplyFtrl", 0}};
  auto it = grad.find(op);
  return it == grad.end() ? -1 : it->second;
}

// The dtypes a GPU kernel takes at device input `i` / makes at output `o`, beyond float32.
bool gpu_input_dtype_ok(const std::string& op, int i, DType t) {
  if (t == DType::f32) return true;
  if (op == "SparseSoftmaxCrossEntropyWithLogits" && i == 1) return t == DType::i32 || t == DType::i64;
  if (op == "Cast") return t == DType::i32 || t == DType::i64 || t == DType::boolean;
  if (op == "Select" && i == 0) return t == DType::boolean;
  // Ops that only pass buffers along or keep state take any dtype a GPU can hold.
  if (op == "Identity" || op == "StopGradient" || op == "Reshape" || op == "ExpandDims" || op == "Squeeze")
    return t == DType::i32 || t == DType::i64 || t == DType::boolean;
  return false;
}

bool gpu_output_dtype_ok(const std::string& op, DType t) {
  if (t == DType::f32) return true;
  if (op == "Cast") return t == DType::i32 || t == DType::i64 || t == DType::boolean;
  if (op == "Greater" || op == "Less" || op == "GreaterEqual" || op == "LessEqual") return t == DType::boolean;
  return gpu_input_dtype_ok(op, 0, t) && op != "Select" && op != "SparseSoftmaxCrossEntropyWithLogits";
}

// Why the node cannot run on GPU `index`, or "" when it can.
std::string gpu_refusal(const Node& n, const std::function<const Node&(int)>& node_of, int index, int num_gpus) {
  if (index >= num_gpus)
    return "there is no GPU " + std::to_string(index) + " (this process sees " + std::to_string(num_gpus) + ")";
  if (!KernelRegistry::global().has(n.op, DeviceType::GPU)) return "no GPU kernel for " + n.op;
  if (is_copy(n.op)) return "";
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    const Endpoint& e = n.inputs[i];
    if (gpu_input_in_host_memory(n.op, static_cast<int>(i))) continue;
    const Node& p = node_of(e.node);
    const DType t = p.output_dtypes[static_cast<size_t>(e.index)];
    if (!gpu_input_dtype_ok(n.op, static_cast<int>(i), t))
      return std::string("its GPU kernel takes float32 only, input from '") + p.name + "' is " + dtype_name(t);
  }
  for (DType t : n.output_dtypes)
    if (!gpu_output_dtype_ok(n.op, t)) return std::string("its GPU kernel makes float32 only, not ") + dtype_name(t);
  return "";
}

// The GPU a node's device name asks for, -1 for none (an error for a name that does not parse).
Result<int> requested_gpu(const Node& n) {
  if (n.device.empty()) return -1;
  Result<DeviceName> name = parse_device_name(n.device);
  if (!name.ok()) return name.status().with_context("node '" + n.name + "'");
  if (name->type != "gpu") return -1;
  return name->index < 0 ? 0 : name->index;
}

// The variables a stateful node reads or writes through its attributes (VariableV2 is
// its own variable; Assign*, ReadVariable and Apply* name theirs and their slots).
std::vector<std::string> variables_of(const Node& n) {
  std::vector<std::string> v;
  if (n.op == "VariableV2") v.push_back(n.name);
  // It reads whether there is a value, never the value (a host bool from the shared
  // resources): it stays on the CPU and keeps no variable there.
  if (!n.has_attr("variable") || n.op == "IsVariableInitialized") return v;
  v.push_back(n.attr_string("variable"));
  if (starts_with(n.op, "Apply") || starts_with(n.op, "SparseApply"))
    for (const char* slot : {"accum", "accum_update", "ms", "mom", "m", "v", "linear"})
      if (n.has_attr(slot)) v.push_back(n.attr_string(slot));
  return v;
}

}  // namespace

bool gpu_input_in_host_memory(const std::string& op, int input) {
  // The batch norm's is_training flag picks which cuDNN call to queue: its GPU kernel reads
  // it on the host (ops/cuda/gpu_cudnn_batchnorm.cpp).
  if ((op == "FusedBatchNorm" && input == 5) || (op == "FusedBatchNormGrad" && input == 7)) return true;
  // An Apply op's hyperparameters are host scalars (its kernel reads them when it queues
  // the update); only the gradient is on the device.
  const int grad = apply_grad_input(op);
  return grad >= 0 && input != grad;
}

Result<GpuPlacement> place_on_gpus(const Graph& g, const GpuPlacementOptions& opts) {
  return place_nodes_on_gpus(
      g.num_nodes(), [&g](int id) -> const Node& { return g.node(id); }, opts);
}

Result<GpuPlacement> place_nodes_on_gpus(int num_nodes, const std::function<const Node&(int)>& node_of,
                                         const GpuPlacementOptions& opts) {
  GpuPlacement p;
  p.devices.assign(static_cast<size_t>(num_nodes), DeviceId{DeviceType::CPU, 0});
  std::vector<int> asked(static_cast<size_t>(num_nodes), -1);
  bool any = false;
  for (int i = 0; i < num_nodes; ++i) {
    AF_ASSIGN_OR_RETURN(asked[static_cast<size_t>(i)], requested_gpu(node_of(i)));
    any = any || asked[static_cast<size_t>(i)] >= 0;
  }
  if (!any) return p;  // nothing asks for a GPU: CUDA is not even asked how many there are
  const int num_gpus = opts.num_gpus >= 0 ? opts.num_gpus : cuda_device_count();
  std::vector<std::string> why(static_cast<size_t>(num_nodes));
  for (int i = 0; i < num_nodes; ++i) {
    const int index = asked[static_cast<size_t>(i)];
    if (index < 0) continue;
    why[static_cast<size_t>(i)] = gpu_refusal(node_of(i), node_of, index, num_gpus);
    if (why[static_cast<size_t>(i)].empty()) p.devices[static_cast<size_t>(i)] = DeviceId{DeviceType::GPU, index};
  }
  // A variable's value lives where its VariableV2 runs, so every node that touches it
  // (reads, assigns, updates, an optimizer's slots) must run there too, as TF colocates
  // ref users with their variable: the group goes to the GPU only if all of it can.
  std::map<std::string, std::vector<int>> users;
  for (int i = 0; i < num_nodes; ++i)
    for (const std::string& v : variables_of(node_of(i))) users[v].push_back(i);
  // Union of the variables an Apply op ties together (a variable and its slots).
  std::map<std::string, std::string> parent;
  std::function<std::string(const std::string&)> root = [&](const std::string& v) -> std::string {
    auto it = parent.find(v);
    if (it == parent.end() || it->second == v) return v;
    return it->second = root(it->second);
  };
  for (int i = 0; i < num_nodes; ++i) {
    auto vars = variables_of(node_of(i));
    for (size_t k = 1; k < vars.size(); ++k) parent[root(vars[k])] = root(vars[0]);
  }
  std::map<std::string, std::vector<int>> groups;
  for (auto& [v, ids] : users) {
    auto& grp = groups[root(v)];
    grp.insert(grp.end(), ids.begin(), ids.end());
  }
  for (auto& [v, ids] : groups) {
    // The GPU of the group's first node that asked for one and can run there.
    int gpu = -1;
    std::string blocker;
    for (int id : ids) {
      const DeviceId d = p.devices[static_cast<size_t>(id)];
      if (d.type == DeviceType::GPU && gpu < 0) gpu = d.index;
    }
    if (gpu < 0) continue;
    for (int id : ids) {
      const DeviceId d = p.devices[static_cast<size_t>(id)];
      if (d.type == DeviceType::GPU && d.index == gpu) continue;
      const Node& n = node_of(id);
      std::string w = gpu_refusal(n, node_of, gpu, num_gpus);
      if (!w.empty()) {
        blocker = "variable '" + v + "' stays on the CPU with '" + n.name + "' (" + n.op + "): " + w;
        break;
      }
    }
    for (int id : ids) {
      DeviceId& d = p.devices[static_cast<size_t>(id)];
      if (blocker.empty()) {
        d = DeviceId{DeviceType::GPU, gpu};
        why[static_cast<size_t>(id)].clear();
      } else if (d.type == DeviceType::GPU) {
        d = DeviceId{DeviceType::CPU, 0};
        why[static_cast<size_t>(id)] = blocker;
      }
    }
  }
  for (int i = 0; i < num_nodes; ++i) {
    const int index = asked[static_cast<size_t>(i)];
    if (index < 0 || p.devices[static_cast<size_t>(i)].type == DeviceType::GPU) continue;
    const Node& n = node_of(i);
    p.fallbacks.push_back("soft placement: node '" + n.name + "' (" + n.op + ") asked for /gpu:" +
                          std::to_string(index) + " and runs on the CPU: " + why[static_cast<size_t>(i)]);
    if (opts.log) std::cerr << "actorflow: " << p.fallbacks.back() << "\n";
  }
  return p;
}

std::vector<DeviceCrossing> device_crossings(const Graph& g, const GpuPlacement& p) {
  std::vector<DeviceCrossing> out;
  for (int i = 0; i < g.num_nodes(); ++i) {
    const Node& n = g.node(i);
    const DeviceId to = p.devices[static_cast<size_t>(i)];
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      const Endpoint& e = n.inputs[k];
      const DeviceId from = p.devices[static_cast<size_t>(e.node)];
      // A GPU kernel's host-memory input wants the value on the host.
      const DeviceId want = to.type == DeviceType::GPU && gpu_input_in_host_memory(n.op, static_cast<int>(k))
                                ? DeviceId{DeviceType::CPU, 0}
                                : to;
      if (from == want) continue;
      DeviceCrossing c;
      c.from = e;
      c.to_node = i;
      c.to_input = static_cast<int>(k);
      c.from_device = from;
      c.to_device = want;
      c.copy_op = from.type == DeviceType::CPU ? "_CopyToDevice" : "_CopyToHost";
      out.push_back(c);
    }
  }
  return out;
}

}  // namespace actorflow
