// The graph IR: nodes with an op type, a unique name, attributes, data inputs
// (node:output), control inputs and a requested device. Nodes are added in an order
// where inputs precede consumers; shape and dtype inference runs as each node is added.
#pragma once
#include "actorflow/api.h"
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "actorflow/attr_value.h"
#include "actorflow/status.h"

AF_PUBLIC_BEGIN

namespace actorflow {

class Graph;
struct OpDef;

// One output of one node, as stored in the graph.
struct Endpoint {
  int node = -1;
  int index = 0;
  bool operator==(const Endpoint& o) const { return node == o.node && index == o.index; }
  bool operator<(const Endpoint& o) const { return node < o.node || (node == o.node && index < o.index); }
};

class Node {
 public:
  int id = -1;
  std::string name;
  std::string op;
  std::string device;  // requested, e.g. "/job:worker/task:1/cpu:0"; empty = anywhere
  std::vector<Endpoint> inputs;
  std::vector<int> control_inputs;
  std::map<std::string, AttrValue> attrs;
  // Filled by shape inference.
  std::vector<DType> output_dtypes;
  std::vector<Shape> output_shapes;

  int num_outputs() const { return static_cast<int>(output_dtypes.size()); }
  bool has_attr(const std::string& key) const { return attrs.count(key) != 0; }
  const AttrValue* find_attr(const std::string& key) const;
  int64_t attr_int(const std::string& key, int64_t dflt = 0) const;
  double attr_float(const std::string& key, double dflt = 0) const;
  bool attr_bool(const std::string& key, bool dflt = false) const;
  std::string attr_string(const std::string& key, const std::string& dflt = "") const;
  DType attr_dtype(const std::string& key, DType dflt = DType::invalid) const;
  Shape attr_shape(const std::string& key) const;
  std::vector<int64_t> attr_ints(const std::string& key) const;
  std::vector<double> attr_floats(const std::string& key) const;
  const Tensor* attr_tensor(const std::string& key) const;
};

// A handle to one output of a node: what the DSL passes around.
class Output {
 public:
  Output() = default;
  Output(Graph* g, int node, int index = 0) : graph_(g), node_(node), index_(index) {}
  Graph* graph() const { return graph_; }
  int node_id() const { return node_; }
  int index() const { return index_; }
  // False for a default-constructed Output; node(), dtype(), shape() and name() then
  // throw af::Error saying so.
  bool valid() const { return graph_ != nullptr; }
  const Node& node() const;
  DType dtype() const;
  const Shape& shape() const;
  std::string name() const;  // "node:index"
  Endpoint endpoint() const { return {node_, index_}; }

 private:
  Graph* graph_ = nullptr;
  int node_ = -1;
  int index_ = 0;
};

// A handle to a node run for its effect (an assign, a group, a train op).
class Operation {
 public:
  Operation() = default;
  Operation(Graph* g, int node) : graph_(g), node_(node) {}
  Operation(const Output& o) : graph_(o.graph()), node_(o.node_id()) {}
  Graph* graph() const { return graph_; }
  int node_id() const { return node_; }
  bool valid() const { return graph_ != nullptr; }
  const Node& node() const;
  const std::string& name() const;
  Output output(int i = 0) const { return Output(graph_, node_, i); }

 private:
  Graph* graph_ = nullptr;
  int node_ = -1;
};

// How get_variable treats a variable that exists (TF1's `reuse` of a variable_scope):
// inherit the enclosing scope's mode (the root creates), share it, or share it when it
// exists and create it otherwise.
enum class VarReuse { inherit, reuse, auto_reuse };

// What the DSL asks the graph to add.
struct NodeSpec {
  std::string op;
  std::string name;  // base name; made unique and prefixed by the name scope
  std::vector<Output> inputs;
  std::vector<Operation> control_inputs;
  std::map<std::string, AttrValue> attrs;
};

class Graph {
 public:
  // `name` only labels the graph in messages; every graph also gets a process-unique id.
  explicit Graph(std::string name = {});
  ~Graph();
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  // Adds a node: resolves the op, fills default attrs, applies scopes, runs shape
  // inference. An error names the node and its inputs; the graph is left unchanged.
  Result<Operation> add_node(NodeSpec spec);
  // Adds a node exactly as given (name, device and control inputs already final), as
  // a GraphDef importer does. Inputs must refer to existing nodes.
  Result<Operation> add_node_raw(Node node);
  // Adds a control edge after the fact; fails if it would create a cycle.
  Status add_control_input(int node, int dep);

  uint64_t id() const { return id_; }
  const std::string& name() const { return name_; }
  // How messages name the graph: "graph #3" or "graph 'train' (#3)".
  std::string label() const;

  // OK when the handle names a node of this graph; otherwise a message naming `what`
  // ("fetch", "feed", ...), the node and both graphs, or saying the handle is invalid.
  Status check_owns(const Output& o, const std::string& what) const;
  Status check_owns(const Operation& op, const std::string& what) const;

  int num_nodes() const { return static_cast<int>(nodes_.size()); }
  const Node& node(int id) const { return *nodes_[static_cast<size_t>(id)]; }
  Node& mutable_node(int id) { return *nodes_[static_cast<size_t>(id)]; }
  const Node* find_node(const std::string& name) const;
  // "name" or "name:i".
  Result<Output> find_output(const std::string& name);
  const OpDef* op_def(int node) const;
  // Consumers of each node (data and control), computed on demand.
  std::vector<std::vector<int>> consumers() const;

  // Kahn's algorithm over data and control edges; an error names a node on a cycle.
  Result<std::vector<int>> topological_order() const;
  Status check_acyclic() const { return topological_order().status(); }
  // Every node the given nodes transitively depend on (them included), in id order.
  std::vector<int> prune(const std::vector<int>& targets) const;

  // Scopes (used by NameScope / DeviceScope / ControlDependencies).
  std::string unique_name(const std::string& base);
  // What unique_name would return, without reserving it.
  std::string peek_unique_name(const std::string& base) const;
  std::string current_name_scope() const;
  // A scope is made unique among its siblings ("dense", "dense_1"), except one ending in
  // "/", which is taken as the whole prefix as it stands (TF's rule), e.g. "dense/w/";
  // "/" alone is the root.
  void push_name_scope(const std::string& s);
  void pop_name_scope();
  void push_device(const std::string& d);
  // A device function (TF's `with tf.device(fn)`): decides the device of each node made
  // in its scope from the node (op, attributes, and the device the enclosing scopes
  // gave it). See replica_device_setter.
  void push_device_function(std::function<std::string(const Node&)> fn);
  void pop_device();
  const std::string& current_device() const;
  void push_control_dependencies(std::vector<Operation> deps);
  void pop_control_dependencies();
  void push_compute_type(const std::string& t);
  void pop_compute_type();

  // Variable scopes (VariableScope in variables.h) and the variables get_variable made.
  struct VarScope {
    std::string name;  // full, "" at the root
    VarReuse reuse = VarReuse::inherit;  // resolved: never inherit below the root
  };
  const VarScope& variable_scope() const;
  // Opens a variable scope under the current one and returns its full name: `name` as
  // given, or with `unique`, `name` made unique among the scopes opened under the current
  // one since it was last entered ("dense", "dense_1"). Entering a scope restarts that
  // count for its own subscopes, so a model built twice gets the same names twice. An
  // empty name re-enters the current scope (to change its reuse).
  std::string push_variable_scope(const std::string& name, VarReuse reuse, bool unique);
  void pop_variable_scope();
  // The VariableV2 node get_variable made under the full name `name`, or -1.
  int stored_variable(const std::string& name) const;
  void store_variable(const std::string& name, int node) { var_store_[name] = node; }

  // Named lists of nodes, as TF's collections ("variables", "init_ops", ...).
  void add_to_collection(const std::string& key, int node);
  const std::vector<int>& collection(const std::string& key) const;
  const std::map<std::string, std::vector<int>>& collections() const { return collections_; }

  // Bumped on every change, so sessions know the graph grew.
  uint64_t version() const { return version_; }
  // Graph-level seed for random ops without an op seed (-1 = none).
  void set_seed(int64_t seed) { seed_ = seed; }
  int64_t seed() const { return seed_; }
  int64_t next_op_seed() { return ++op_seed_counter_; }
  // Continues op seeds after `last` (a loaded graph's ops already used 1..last).
  void skip_op_seeds_to(int64_t last) {
    if (last > op_seed_counter_ && last < (int64_t{1} << 62)) op_seed_counter_ = last;
  }

  // A readable listing, one node per line.
  std::string to_string() const;

  // GraphDef (Cap'n Proto, schemas/graph.capnp): bytes and a checksummed file.
  std::string serialize() const;
  static Result<std::unique_ptr<Graph>> deserialize(const std::string& bytes);
  Status save(const std::string& path) const;
  static Result<std::unique_ptr<Graph>> load(const std::string& path);

 private:
  Status infer(Node& node) const;
  // "input 'x:0' belongs to graph #2, not to graph #1 where ..." and friends.
  std::string foreign(const std::string& what, const Graph* other) const;
  uint64_t id_;
  std::string name_;
  std::vector<std::unique_ptr<Node>> nodes_;
  std::map<std::string, int> by_name_;
  std::map<std::string, int> name_counts_;
  std::map<std::string, int> scope_counts_;
  std::vector<std::string> name_scopes_;  // each a full prefix ending in "/"
  struct DeviceEntry {
    std::string device;
    std::function<std::string(const Node&)> fn;  // set for a device function
  };
  std::vector<DeviceEntry> devices_;
  std::vector<std::vector<Operation>> control_scopes_;
  std::vector<std::string> compute_types_;
  std::map<std::string, std::vector<int>> collections_;
  std::vector<VarScope> var_scopes_;
  std::map<std::string, int> var_scope_counts_;
  std::map<std::string, int> var_store_;
  uint64_t version_ = 0;
  int64_t seed_ = -1;
  int64_t op_seed_counter_ = 0;
};

// RAII scopes.
class NameScope {
 public:
  NameScope(Graph& g, const std::string& name) : g_(g) { g_.push_name_scope(name); }
  ~NameScope() { g_.pop_name_scope(); }
  NameScope(const NameScope&) = delete;
  NameScope& operator=(const NameScope&) = delete;

 private:
  Graph& g_;
};

class DeviceScope {
 public:
  DeviceScope(Graph& g, const std::string& device) : g_(g) { g_.push_device(device); }
  DeviceScope(Graph& g, std::function<std::string(const Node&)> device_fn) : g_(g) {
    g_.push_device_function(std::move(device_fn));
  }
  ~DeviceScope() { g_.pop_device(); }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  Graph& g_;
};

// Mixed precision (Keras's mixed_bfloat16 policy, for the math only): the ops made in this
// scope that can multiply in a narrower type (Conv2D and MatMul, and the gradients built
// from them) get attribute compute_type = `type` ("bfloat16"). Their inputs, outputs and
// variables stay float32; their CPU kernels round the operands to bfloat16 and sum in
// float32 where the processor has AMX (bfloat16 matrix units), and compute in float32
// elsewhere (AVX512-BF16 alone included: slower than float32 there) and on GPUs. About 3
// significant digits per operand instead of 7: training converges as in float32 for the
// models tried (bench/README.md).
class ComputeTypeScope {
 public:
  ComputeTypeScope(Graph& g, const std::string& type) : g_(g) { g_.push_compute_type(type); }
  ~ComputeTypeScope() { g_.pop_compute_type(); }
  ComputeTypeScope(const ComputeTypeScope&) = delete;
  ComputeTypeScope& operator=(const ComputeTypeScope&) = delete;

 private:
  Graph& g_;
};

class ControlDependencies {
 public:
  ControlDependencies(Graph& g, std::vector<Operation> deps) : g_(g) {
    g_.push_control_dependencies(std::move(deps));
  }
  ~ControlDependencies() { g_.pop_control_dependencies(); }
  ControlDependencies(const ControlDependencies&) = delete;
  ControlDependencies& operator=(const ControlDependencies&) = delete;

 private:
  Graph& g_;
};

}  // namespace actorflow

AF_PUBLIC_END
