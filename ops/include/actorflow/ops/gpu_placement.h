// Soft placement for GPUs, as TF's: a node whose device names a GPU runs there when that
// GPU exists and the op has a GPU kernel for its dtypes; otherwise on the host's CPU,
// with one log line that names the node and says why. And the edges that then cross
// between the host and a GPU, each of which needs a _CopyToDevice or _CopyToHost.
// Pure functions of the graph; local sessions call them for every plan whose nodes ask for
// a GPU (actors/src/gpu_plan.cpp) and insert the copies.
#pragma once
#include "actorflow/api.h"
#include <functional>
#include <string>
#include <vector>

#include "actorflow/graph.h"

AF_PUBLIC_BEGIN

namespace actorflow {

struct GpuPlacementOptions {
  // GPUs present; -1 asks CUDA (0 without CUDA or a driver). Tests set it.
  int num_gpus = -1;
  // Writes each fallback line to stderr as well.
  bool log = true;
};

struct GpuPlacement {
  std::vector<DeviceId> devices;      // by node id; the job and task of a name are ignored
  std::vector<std::string> fallbacks;  // one line per node that asked for a GPU and got the CPU
};

// A device name that does not parse is an error naming the node. The nodes that use one
// variable (VariableV2, ReadVariable, Assign*, Apply* with their slots) are placed
// together: on the GPU only if every one of them can run there. A graph where no node
// asks for a GPU does not ask CUDA anything.
Result<GpuPlacement> place_on_gpus(const Graph& g, const GpuPlacementOptions& opts = {});
// The same over nodes 0..num_nodes-1 as `node_of` gives them (the runtime's plans, whose
// nodes may be rewritten copies of the graph's).
Result<GpuPlacement> place_nodes_on_gpus(int num_nodes, const std::function<const Node&(int)>& node_of,
                                         const GpuPlacementOptions& opts = {});

// Inputs that a GPU kernel reads from host memory (TF's HostMemory): an Apply op's
// hyperparameter scalars, FusedBatchNorm's is_training (input 5) and FusedBatchNormGrad's (7). An edge into one from a GPU needs a _CopyToHost; from the CPU none.
bool gpu_input_in_host_memory(const std::string& op, int input);

// A data edge whose two ends were placed on different devices.
struct DeviceCrossing {
  Endpoint from;         // the producer's output
  int to_node = -1;      // the consumer and which of its inputs
  int to_input = -1;
  DeviceId from_device, to_device;
  const char* copy_op;   // "_CopyToDevice" (host -> GPU) or "_CopyToHost" (GPU -> host)
};

// In node order, then input order. A GPU -> GPU edge between two devices is listed with
// copy_op "_CopyToHost" (it goes through the host until peer copies exist).
std::vector<DeviceCrossing> device_crossings(const Graph& g, const GpuPlacement& p);

}  // namespace actorflow

AF_PUBLIC_END
