// Cuts a graph into one graph per location (task + device) for execution across
// processes, as TF's graph_partition.cc does: every node goes to the location its device
// names (nodes without a device go to the default location), and every edge between two
// locations becomes a _Send in the producer's partition and a _Recv in the consumer's,
// one pair per (producer output, consumer location) however many consumers read it there.
// An op that names a variable by attribute (Assign, ReadVariable) runs where that
// variable does, and brings it into the partition even when no edge leads to it.
// A control edge between locations becomes a _Send that waits for the producer and
// sends a scalar, and a _Recv of it that the consumer waits for.
#pragma once
#include "actorflow/api.h"
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "actorflow/graph.h"

AF_PUBLIC_BEGIN

namespace actorflow {

struct PartitionOptions {
  // Where nodes without a device run, and what fills the parts a device leaves out.
  std::string default_location = "/job:localhost/task:0/cpu:0";
  // The nodes to partition (e.g. a StepPlan's); empty = the whole graph. Every input of
  // a listed node must be listed too.
  std::vector<int> nodes;
  // Overrides the device-based placement when set: the location of a node.
  std::function<Result<std::string>(const Node&)> node_to_loc;
};

// One cut edge: the _Send in `send_location`, the _Recv in `recv_location`.
struct PartitionEdge {
  int64_t id = 0;
  std::string tensor_name;  // "edge_<id>_<producer>"
  std::string send_location, recv_location;
  Endpoint src;             // in the original graph; index -1 for a control edge
  DType dtype = DType::invalid;
  Shape shape;
};

struct Partitions {
  // location (canonical, see DeviceName::to_string) -> its graph. Original nodes keep
  // their names; _Send/_Recv nodes are named "_Send/<tensor_name>", "_Recv/<tensor_name>".
  std::map<std::string, std::unique_ptr<Graph>> graphs;
  std::vector<PartitionEdge> edges;  // by id
  std::map<std::string, std::string> location_of;  // original node name -> location
};

// The canonical location of a node under `opts` (its device completed by the default).
Result<std::string> node_location(const Node& node, const PartitionOptions& opts);

Result<Partitions> partition(const Graph& g, const PartitionOptions& opts = {});

}  // namespace actorflow

AF_PUBLIC_END
