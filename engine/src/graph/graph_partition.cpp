// The partitioner; see graph_partition.h. TF's Partition() is one 350-line function; here
// the loop over nodes stays short and the pieces it needs (a location per node, adding a
// _Send/_Recv pair) are separate.
#include "actorflow/graph_partition.h"

#include <algorithm>
#include <tuple>

#include "actorflow/device_name.h"

namespace actorflow {
namespace {

// Builds the partitions while walking the original graph in topological order.
class Partitioner {
 public:
  Partitioner(const Graph& g, const PartitionOptions& opts) : g_(g), opts_(opts) {}

  Result<Partitions> run() {
    AF_ASSIGN_OR_RETURN(std::vector<int> order, g_.topological_order());
    std::vector<bool> wanted(static_cast<size_t>(g_.num_nodes()), opts_.nodes.empty());
    for (int n : opts_.nodes) {
      if (n < 0 || n >= g_.num_nodes()) return invalid_argument("partition: node id " + std::to_string(n) + " out of range");
      wanted[static_cast<size_t>(n)] = true;
    }
    // Ops that name a variable by attribute (Assign, ReadVariable, metric updates) need
    // its VariableV2 node in their partition, though no edge says so.
    for (int n = 0; n < g_.num_nodes(); ++n)
      if (wanted[static_cast<size_t>(n)])
        for (int v : variables_of(n)) wanted[static_cast<size_t>(v)] = true;
    loc_.assign(static_cast<size_t>(g_.num_nodes()), "");
    new_id_.assign(static_cast<size_t>(g_.num_nodes()), -1);
    // Variables first (they read nothing), so the ops naming them find their location.
    for (int n : order)
      if (wanted[static_cast<size_t>(n)] && g_.node(n).op == "VariableV2" && g_.node(n).control_inputs.empty())
        AF_RETURN_IF_ERROR(place(n, wanted));
    for (int n : order)
      if (wanted[static_cast<size_t>(n)] && new_id_[static_cast<size_t>(n)] < 0) AF_RETURN_IF_ERROR(place(n, wanted));
    return std::move(out_);
  }

 private:
  Graph& graph_at(const std::string& loc) {
    auto& slot = out_.graphs[loc];
    if (!slot) slot = std::make_unique<Graph>("partition " + loc);
    return *slot;
  }

  // The VariableV2 nodes that node `n` names in its string attributes.
  std::vector<int> variables_of(int n) const {
    std::vector<int> out;
    for (auto& [key, value] : g_.node(n).attrs) {
      if (!value.is<std::string>()) continue;
      const Node* v = g_.find_node(value.get<std::string>());
      if (v && v->op == "VariableV2" && v->id != n) out.push_back(v->id);
    }
    return out;
  }

  Status place(int id, const std::vector<bool>& wanted) {
    const Node& orig = g_.node(id);
    AF_ASSIGN_OR_RETURN(std::string loc, node_location(orig, opts_));
    // An op on a variable runs where the variable lives (TF colocates them): the
    // variable's state is that process's.
    std::vector<int> vars = variables_of(id);
    if (!vars.empty() && !loc_[static_cast<size_t>(vars[0])].empty()) {
      const std::string& var_loc = loc_[static_cast<size_t>(vars[0])];
      // Colocation decides; a placement that says otherwise is a mistake to report.
      for (int v : vars)
        if (!loc_[static_cast<size_t>(v)].empty() && loc_[static_cast<size_t>(v)] != var_loc)
          return invalid_argument("'" + orig.name + "' (" + orig.op + ") uses variable '" + g_.node(vars[0]).name +
                                  "' on " + var_loc + " and variable '" + g_.node(v).name + "' on " +
                                  loc_[static_cast<size_t>(v)] + "; the variables an op updates must share a task");
      if (!orig.device.empty() && loc != var_loc && !opts_.node_to_loc)
        return invalid_argument("'" + orig.name + "' (" + orig.op + ") is placed on " + loc + " but uses variable '" +
                                g_.node(vars[0]).name + "' on " + var_loc +
                                "; an op on a variable runs where the variable lives: drop its device or place "
                                "both on one task");
      loc = var_loc;
    }
    loc_[static_cast<size_t>(id)] = loc;
    out_.location_of[orig.name] = loc;
    Node n;
    n.name = orig.name;
    n.op = orig.op;
    n.device = orig.device;
    n.attrs = orig.attrs;
    for (const Endpoint& in : orig.inputs) {
      if (!wanted[static_cast<size_t>(in.node)])
        return invalid_argument("partition: node '" + orig.name + "' reads '" + g_.node(in.node).name +
                                "', which is not among the nodes to partition");
      if (loc_[static_cast<size_t>(in.node)] == loc) {
        n.inputs.push_back({new_id_[static_cast<size_t>(in.node)], in.index});
      } else {
        AF_ASSIGN_OR_RETURN(int recv, recv_for(in, loc));
        n.inputs.push_back({recv, 0});
      }
    }
    for (int c : orig.control_inputs) {
      if (!wanted[static_cast<size_t>(c)])
        return invalid_argument("partition: node '" + orig.name + "' waits for '" + g_.node(c).name +
                                "', which is not among the nodes to partition");
      int dep = new_id_[static_cast<size_t>(c)];
      if (loc_[static_cast<size_t>(c)] != loc) {
        AF_ASSIGN_OR_RETURN(dep, recv_for({c, -1}, loc));
      }
      if (std::find(n.control_inputs.begin(), n.control_inputs.end(), dep) == n.control_inputs.end())
        n.control_inputs.push_back(dep);
    }
    auto added = graph_at(loc).add_node_raw(std::move(n));
    if (!added.ok()) return Status(added.status().code(), "partition " + loc + ": " + added.status().message());
    new_id_[static_cast<size_t>(id)] = added->node_id();
    return Status::OK();
  }

  // The _Recv in `dst_loc` that yields `src` (index -1: the control signal of src.node),
  // made with its _Send on first use; TF's DupRecvKey deduplication.
  Result<int> recv_for(Endpoint src, const std::string& dst_loc) {
    auto key = std::make_tuple(src.node, src.index, dst_loc);
    auto it = recvs_.find(key);
    if (it != recvs_.end()) return it->second;
    const std::string& src_loc = loc_[static_cast<size_t>(src.node)];
    const Node& producer = g_.node(src.node);
    // A control edge sends nothing but its arrival: a _Send without data input that
    // waits for the producer, and a _Recv of a scalar.
    bool control = src.index < 0;
    Endpoint sent{new_id_[static_cast<size_t>(src.node)], src.index};
    PartitionEdge e;
    e.id = static_cast<int64_t>(out_.edges.size());
    e.tensor_name = "edge_" + std::to_string(e.id) + "_" + producer.name;
    e.send_location = src_loc;
    e.recv_location = dst_loc;
    e.src = src;
    const Node& sent_node = graph_at(src_loc).node(sent.node);
    e.dtype = control ? DType::f32 : sent_node.output_dtypes[static_cast<size_t>(sent.index)];
    e.shape = control ? Shape{} : sent_node.output_shapes[static_cast<size_t>(sent.index)];
    auto attrs = [&] {
      std::map<std::string, AttrValue> a;
      a["tensor_name"] = e.tensor_name;
      a["edge_id"] = e.id;
      a["send_task"] = e.send_location;
      a["recv_task"] = e.recv_location;
      a["dtype"] = e.dtype;
      a["shape"] = e.shape;
      return a;
    };
    Node send;
    send.name = "_Send/" + e.tensor_name;
    send.op = "_Send";
    send.device = src_loc;
    if (control) send.control_inputs.push_back(sent.node);
    else send.inputs.push_back(sent);
    send.attrs = attrs();
    AF_RETURN_IF_ERROR(add(src_loc, std::move(send)).status());
    Node recv;
    recv.name = "_Recv/" + e.tensor_name;
    recv.op = "_Recv";
    recv.device = dst_loc;
    recv.attrs = attrs();
    AF_ASSIGN_OR_RETURN(int recv_id, add(dst_loc, std::move(recv)));
    out_.edges.push_back(std::move(e));
    recvs_[key] = recv_id;
    return recv_id;
  }

  Result<int> add(const std::string& loc, Node n) {
    auto r = graph_at(loc).add_node_raw(std::move(n));
    if (!r.ok()) return Status(r.status().code(), "partition " + loc + ": " + r.status().message());
    return r->node_id();
  }

  const Graph& g_;
  const PartitionOptions& opts_;
  Partitions out_;
  std::vector<std::string> loc_;  // per original node
  std::vector<int> new_id_;       // per original node: its id in its partition
  std::map<std::tuple<int, int, std::string>, int> recvs_;
};

}  // namespace

Result<std::string> node_location(const Node& node, const PartitionOptions& opts) {
  if (opts.node_to_loc) return opts.node_to_loc(node);
  AF_ASSIGN_OR_RETURN(DeviceName dflt, parse_device_name(opts.default_location));
  if (!dflt.fully_specified())
    return invalid_argument("partition: the default location '" + opts.default_location +
                            "' must name a job, a task and a device");
  auto dev = parse_device_name(node.device);
  if (!dev.ok()) return Status(dev.status().code(), "node '" + node.name + "': " + dev.status().message());
  return dev->completed_by(dflt).to_string();
}

Result<Partitions> partition(const Graph& g, const PartitionOptions& opts) {
  return Partitioner(g, opts).run();
}

}  // namespace actorflow
