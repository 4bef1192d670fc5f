// Soft placement for GPUs, as TF's: a node whose device names a GPU runs there when that
// GPU exists and the op has a GPU kernel for its dtypes; otherwise on the host's CPU,
// with one log line that names the node and says why. And the edges that then cross
// between the host and a GPU, each of which needs a _CopyToDevice or _CopyToHost.
// Pure functions of the graph: the runtime's placement (local sessions, the partitioner's
// node_to_loc) is meant to call them; that wiring is the next step of issue 15.
#pragma once
#include <string>
#include <vector>

#include "actorflow/graph.h"

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

// A device name that does not parse is an error naming the node.
Result<GpuPlacement> place_on_gpus(const Graph& g, const GpuPlacementOptions& opts = {});

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
