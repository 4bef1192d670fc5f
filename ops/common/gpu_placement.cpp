// Soft placement (gpu_placement.h). Which kernels a GPU has is read from the kernel
// registry; which dtypes they take is fixed here: float32 only for now (copies excepted).
#include "actorflow/ops/gpu_placement.h"

#include <iostream>

#include "actorflow/device_name.h"
#include "actorflow/kernel.h"
#include "actorflow/ops/cuda_info.h"

namespace actorflow {
namespace {

bool is_copy(const std::string& op) { return op == "_CopyToDevice" || op == "_CopyToHost"; }

// Why the node cannot run on GPU `index`, or "" when it can.
std::string gpu_refusal(const Graph& g, const Node& n, int index, int num_gpus) {
  if (index >= num_gpus)
    return "there is no GPU " + std::to_string(index) + " (this process sees " + std::to_string(num_gpus) + ")";
  if (!KernelRegistry::global().has(n.op, DeviceType::GPU)) return "no GPU kernel for " + n.op;
  if (is_copy(n.op)) return "";
  for (const Endpoint& e : n.inputs) {
    const DType t = g.node(e.node).output_dtypes[static_cast<size_t>(e.index)];
    if (t != DType::f32)
      return std::string("its GPU kernel takes float32 only, input from '") + g.node(e.node).name + "' is " +
             dtype_name(t);
  }
  for (DType t : n.output_dtypes)
    if (t != DType::f32) return std::string("its GPU kernel makes float32 only, not ") + dtype_name(t);
  return "";
}

}  // namespace

Result<GpuPlacement> place_on_gpus(const Graph& g, const GpuPlacementOptions& opts) {
  const int num_gpus = opts.num_gpus >= 0 ? opts.num_gpus : cuda_device_count();
  GpuPlacement p;
  p.devices.resize(static_cast<size_t>(g.num_nodes()));
  for (int i = 0; i < g.num_nodes(); ++i) {
    const Node& n = g.node(i);
    DeviceId& d = p.devices[static_cast<size_t>(i)];
    d = DeviceId{DeviceType::CPU, 0};
    if (n.device.empty()) continue;
    Result<DeviceName> name = parse_device_name(n.device);
    if (!name.ok()) return name.status().with_context("node '" + n.name + "'");
    if (name->type != "gpu") continue;
    const int index = name->index < 0 ? 0 : name->index;
    const std::string why = gpu_refusal(g, n, index, num_gpus);
    if (why.empty()) {
      d = DeviceId{DeviceType::GPU, index};
      continue;
    }
    p.fallbacks.push_back("soft placement: node '" + n.name + "' (" + n.op + ") asked for /gpu:" +
                          std::to_string(index) + " and runs on the CPU: " + why);
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
      if (from == to) continue;
      DeviceCrossing c;
      c.from = e;
      c.to_node = i;
      c.to_input = static_cast<int>(k);
      c.from_device = from;
      c.to_device = to;
      c.copy_op = from.type == DeviceType::CPU ? "_CopyToDevice" : "_CopyToHost";
      out.push_back(c);
    }
  }
  return out;
}

}  // namespace actorflow
