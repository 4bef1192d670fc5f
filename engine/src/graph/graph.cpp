#include "actorflow/graph.h"

#include <algorithm>
#include <atomic>
#include <sstream>

#include "actorflow/op_registry.h"

namespace actorflow {

// ---- Node attribute access ----

const AttrValue* Node::find_attr(const std::string& key) const {
  auto it = attrs.find(key);
  return it == attrs.end() ? nullptr : &it->second;
}
int64_t Node::attr_int(const std::string& key, int64_t dflt) const {
  const AttrValue* a = find_attr(key);
  if (!a) return dflt;
  if (a->is<int64_t>()) return a->get<int64_t>();
  if (a->is<bool>()) return a->get<bool>();
  if (a->is<double>()) return static_cast<int64_t>(a->get<double>());
  return dflt;
}
double Node::attr_float(const std::string& key, double dflt) const {
  const AttrValue* a = find_attr(key);
  if (!a) return dflt;
  if (a->is<double>()) return a->get<double>();
  if (a->is<int64_t>()) return static_cast<double>(a->get<int64_t>());
  return dflt;
}
bool Node::attr_bool(const std::string& key, bool dflt) const {
  const AttrValue* a = find_attr(key);
  if (!a) return dflt;
  if (a->is<bool>()) return a->get<bool>();
  if (a->is<int64_t>()) return a->get<int64_t>() != 0;
  return dflt;
}
std::string Node::attr_string(const std::string& key, const std::string& dflt) const {
  const AttrValue* a = find_attr(key);
  return a && a->is<std::string>() ? a->get<std::string>() : dflt;
}
DType Node::attr_dtype(const std::string& key, DType dflt) const {
  const AttrValue* a = find_attr(key);
  return a && a->is<DType>() ? a->get<DType>() : dflt;
}
Shape Node::attr_shape(const std::string& key) const {
  const AttrValue* a = find_attr(key);
  if (!a) return Shape::unknown_rank();
  if (a->is<Shape>()) return a->get<Shape>();
  if (a->is<AttrValue::Ints>()) return Shape(a->get<AttrValue::Ints>());
  return Shape::unknown_rank();
}
std::vector<int64_t> Node::attr_ints(const std::string& key) const {
  const AttrValue* a = find_attr(key);
  if (!a) return {};
  if (a->is<AttrValue::Ints>()) return a->get<AttrValue::Ints>();
  if (a->is<int64_t>()) return {a->get<int64_t>()};
  if (a->is<Shape>()) return a->get<Shape>().dims();
  return {};
}
std::vector<double> Node::attr_floats(const std::string& key) const {
  const AttrValue* a = find_attr(key);
  if (!a) return {};
  if (a->is<AttrValue::Floats>()) return a->get<AttrValue::Floats>();
  return {};
}
const Tensor* Node::attr_tensor(const std::string& key) const {
  const AttrValue* a = find_attr(key);
  return a && a->is<Tensor>() ? &a->get<Tensor>() : nullptr;
}

// ---- handles ----

namespace {
[[noreturn]] void throw_invalid_handle(const char* what) {
  throw Error(invalid_argument(std::string("invalid ") + what +
                               ": it was default-constructed and names no node of any graph"));
}
}  // namespace

const Node& Output::node() const {
  if (!graph_) throw_invalid_handle("Output");
  return graph_->node(node_);
}
DType Output::dtype() const { return node().output_dtypes[static_cast<size_t>(index_)]; }
const Shape& Output::shape() const { return node().output_shapes[static_cast<size_t>(index_)]; }
std::string Output::name() const { return node().name + ":" + std::to_string(index_); }
const Node& Operation::node() const {
  if (!graph_) throw_invalid_handle("Operation");
  return graph_->node(node_);
}
const std::string& Operation::name() const { return node().name; }

// ---- Graph ----

namespace {
std::atomic<uint64_t> next_graph_id{1};
}  // namespace

Graph::Graph(std::string name) : id_(next_graph_id++), name_(std::move(name)) {}
Graph::~Graph() = default;

std::string Graph::label() const {
  std::string id = "#" + std::to_string(id_);
  return name_.empty() ? "graph " + id : "graph '" + name_ + "' (" + id + ")";
}

Status Graph::check_owns(const Output& o, const std::string& what) const {
  if (!o.valid()) return invalid_argument(what + " is an invalid Output: it was default-constructed and names no node");
  if (o.graph() != this) return invalid_argument(foreign(what + " '" + o.name() + "'", o.graph()));
  return Status::OK();
}

Status Graph::check_owns(const Operation& op, const std::string& what) const {
  if (!op.valid()) return invalid_argument(what + " is an invalid Operation: it was default-constructed and names no node");
  if (op.graph() != this) return invalid_argument(foreign(what + " '" + op.name() + "'", op.graph()));
  return Status::OK();
}

std::string Graph::foreign(const std::string& what, const Graph* other) const {
  return what + " belongs to " + other->label() + ", not to " + label();
}

const Node* Graph::find_node(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : nodes_[static_cast<size_t>(it->second)].get();
}

Result<Output> Graph::find_output(const std::string& name) {
  std::string base = name;
  int index = 0;
  auto colon = name.rfind(':');
  if (colon != std::string::npos) {
    base = name.substr(0, colon);
    try {
      index = std::stoi(name.substr(colon + 1));
    } catch (...) {
      return invalid_argument("bad tensor name '" + name + "'");
    }
  }
  const Node* n = find_node(base);
  if (!n) return not_found("no node named '" + base + "' in the graph");
  if (index < 0 || index >= n->num_outputs())
    return out_of_range("node '" + base + "' has " + std::to_string(n->num_outputs()) + " outputs; asked for " + name);
  return Output(this, n->id, index);
}

const OpDef* Graph::op_def(int node) const { return OpRegistry::global().find(this->node(node).op); }

std::string Graph::current_name_scope() const { return name_scopes_.empty() ? std::string() : name_scopes_.back(); }

void Graph::push_name_scope(const std::string& s) {
  if (!s.empty() && s.back() == '/') {
    // Absolute: "/" alone is the root.
    if (s.size() > 1) scope_counts_.emplace(s.substr(0, s.size() - 1), 0);
    name_scopes_.push_back(s.size() > 1 ? s : std::string());
    return;
  }
  // Scopes are unique like node names: a second "dense" scope becomes "dense_1".
  // A scope may share its name with a node ("w" and "w/Assign"), but two scopes opened
  // under the same name get "name", "name_1", ...
  std::string prefix = current_name_scope();
  std::string full = prefix + s;
  auto it = scope_counts_.find(full);
  if (it != scope_counts_.end()) {
    do full = prefix + s + "_" + std::to_string(++it->second);
    while (scope_counts_.count(full));
  }
  scope_counts_.emplace(full, 0);
  name_scopes_.push_back(full + "/");
}
void Graph::pop_name_scope() { name_scopes_.pop_back(); }
void Graph::push_device(const std::string& d) { devices_.push_back({d, nullptr}); }
void Graph::push_device_function(std::function<std::string(const Node&)> fn) {
  devices_.push_back({"", std::move(fn)});
}
void Graph::pop_device() { devices_.pop_back(); }
const std::string& Graph::current_device() const {
  static const std::string empty;
  for (auto it = devices_.rbegin(); it != devices_.rend(); ++it)
    if (!it->fn) return it->device;
  return empty;
}
void Graph::push_control_dependencies(std::vector<Operation> deps) { control_scopes_.push_back(std::move(deps)); }
void Graph::pop_control_dependencies() { control_scopes_.pop_back(); }
void Graph::push_compute_type(const std::string& t) { compute_types_.push_back(t); }
void Graph::pop_compute_type() { compute_types_.pop_back(); }

std::string Graph::peek_unique_name(const std::string& base) const {
  auto it = name_counts_.find(base);
  if (it == name_counts_.end() && !by_name_.count(base)) return base;
  int next = it == name_counts_.end() ? 1 : it->second + 1;
  std::string candidate;
  do candidate = base + "_" + std::to_string(next++);
  while (by_name_.count(candidate) || name_counts_.count(candidate));
  return candidate;
}

std::string Graph::unique_name(const std::string& base) {
  std::string name = peek_unique_name(base);
  if (name != base) {
    // Remember how far the suffixes for `base` went, so the next one continues there.
    name_counts_[base] = std::stoi(name.substr(base.size() + 1));
  }
  name_counts_.emplace(name, 0);
  return name;
}

const Graph::VarScope& Graph::variable_scope() const {
  static const VarScope root;
  return var_scopes_.empty() ? root : var_scopes_.back();
}

std::string Graph::push_variable_scope(const std::string& name, VarReuse reuse, bool unique) {
  const VarScope& parent = variable_scope();
  std::string full = parent.name;
  if (!name.empty()) {
    const std::string prefix = parent.name.empty() ? "" : parent.name + "/";
    full = prefix + name;
    // A unique name skips scopes opened since the parent was entered, and names with
    // nodes under them that get_variable did not make (a graph loaded from a GraphDef,
    // variables made by variable()); a scope re-entered to reuse its variables stays free.
    auto taken = [&](const std::string& cand) {
      if (var_scope_counts_[cand] > 0) return true;
      const std::string under = cand + "/";
      auto starts = [&](const auto& map) {
        auto it = map.lower_bound(under);
        return it != map.end() && it->first.compare(0, under.size(), under) == 0;
      };
      return starts(by_name_) && !starts(var_store_);
    };
    if (unique && taken(full)) {
      int i = 1;
      while (taken(prefix + name + "_" + std::to_string(i))) ++i;
      full = prefix + name + "_" + std::to_string(i);
    }
  }
  ++var_scope_counts_[full];
  // Entering restarts the count of the scopes under this one (TF's
  // close_variable_subscopes): a model built again here gets the same names again.
  const std::string under = full.empty() ? "" : full + "/";
  for (auto& [k, count] : var_scope_counts_)
    if (k != full && k.compare(0, under.size(), under) == 0) count = 0;
  var_scopes_.push_back({full, reuse == VarReuse::inherit ? parent.reuse : reuse});
  return full;
}

void Graph::pop_variable_scope() { var_scopes_.pop_back(); }

int Graph::stored_variable(const std::string& name) const {
  auto it = var_store_.find(name);
  return it == var_store_.end() ? -1 : it->second;
}

void Graph::add_to_collection(const std::string& key, int node) { collections_[key].push_back(node); }

const std::vector<int>& Graph::collection(const std::string& key) const {
  static const std::vector<int> empty;
  auto it = collections_.find(key);
  return it == collections_.end() ? empty : it->second;
}

Status Graph::infer(Node& node) const {
  const OpDef* def = OpRegistry::global().find(node.op);
  if (!def) return not_found("node '" + node.name + "': unknown op '" + node.op + "'");
  int n = static_cast<int>(node.inputs.size());
  if (n < def->min_inputs || (def->max_inputs >= 0 && n > def->max_inputs)) {
    std::string want = def->max_inputs == def->min_inputs ? std::to_string(def->min_inputs)
                       : def->max_inputs < 0            ? "at least " + std::to_string(def->min_inputs)
                                                        : std::to_string(def->min_inputs) + ".." + std::to_string(def->max_inputs);
    return invalid_argument(node.op + " '" + node.name + "': takes " + want + " inputs, got " + std::to_string(n));
  }
  for (auto& [k, v] : def->default_attrs)
    if (!node.attrs.count(k)) node.attrs[k] = v;
  for (auto& k : def->required_attrs)
    if (!node.attrs.count(k)) return invalid_argument(node.op + " '" + node.name + "': missing required attribute '" + k + "'");
  node.output_dtypes.clear();
  node.output_shapes.clear();
  if (def->num_outputs > 0) {
    node.output_dtypes.assign(static_cast<size_t>(def->num_outputs), DType::invalid);
    node.output_shapes.assign(static_cast<size_t>(def->num_outputs), Shape::unknown_rank());
  }
  if (!def->shape_fn) return internal_error("op '" + node.op + "' has no shape function");
  ShapeContext ctx(*this, node);
  // Shape functions see attributes from user code and from GraphDef files; one that
  // throws (a bad allocation from a fuzzed shape, say) must still yield a Status.
  try {
    AF_RETURN_IF_ERROR(def->shape_fn(ctx));
  } catch (const Error& e) {
    return e.status().with_context(node.op + " '" + node.name + "'");
  } catch (const std::exception& e) {
    return invalid_argument(node.op + " '" + node.name + "': " + e.what());
  }
  for (size_t i = 0; i < node.output_dtypes.size(); ++i)
    if (node.output_dtypes[i] == DType::invalid)
      return internal_error(node.op + " '" + node.name + "': shape function left output " + std::to_string(i) + " without a dtype");
  return Status::OK();
}

Result<Operation> Graph::add_node(NodeSpec spec) {
  auto node = std::make_unique<Node>();
  node->op = spec.op;
  std::string base = current_name_scope() + (spec.name.empty() ? spec.op : spec.name);
  node->device = current_device();
  node->attrs = std::move(spec.attrs);
  // A ComputeTypeScope's type goes to the ops that take one, unless the spec names its own.
  if (!compute_types_.empty() && !node->attrs.count("compute_type"))
    if (const OpDef* def = OpRegistry::global().find(node->op);
        def && std::find(def->optional_attrs.begin(), def->optional_attrs.end(), "compute_type") != def->optional_attrs.end())
      node->attrs["compute_type"] = AttrValue(compute_types_.back());
  for (const Output& in : spec.inputs) {
    if (!in.valid())
      return invalid_argument(spec.op + " '" + base + "': input " + std::to_string(node->inputs.size()) +
                              " is an invalid Output (default-constructed; it names no node)");
    if (in.graph() != this)
      return invalid_argument(spec.op + " '" + base + "': " + foreign("input '" + in.name() + "'", in.graph()));
    node->inputs.push_back(in.endpoint());
  }
  auto add_ctrl = [&](const Operation& op) -> Status {
    if (!op.valid())
      return invalid_argument(spec.op + " '" + base +
                              "': a control input is an invalid Operation (default-constructed; it names no node)");
    if (op.graph() != this)
      return invalid_argument(spec.op + " '" + base + "': " + foreign("control input '" + op.name() + "'", op.graph()));
    if (std::find(node->control_inputs.begin(), node->control_inputs.end(), op.node_id()) == node->control_inputs.end())
      node->control_inputs.push_back(op.node_id());
    return Status::OK();
  };
  for (const Operation& op : spec.control_inputs) AF_RETURN_IF_ERROR(add_ctrl(op));
  for (auto& scope : control_scopes_)
    for (const Operation& op : scope) AF_RETURN_IF_ERROR(add_ctrl(op));
  // Inference runs under the final name so errors name the node the user will see.
  node->name = peek_unique_name(base);
  node->id = static_cast<int>(nodes_.size());
  AF_RETURN_IF_ERROR(infer(*node));
  // Scopes apply outermost first, so the innermost has the last word; a device function
  // sees the node complete, with the device the scopes outside it gave.
  node->device.clear();
  for (auto& d : devices_) node->device = d.fn ? d.fn(*node) : d.device;
  node->name = unique_name(base);
  int id = node->id;
  by_name_[node->name] = id;
  nodes_.push_back(std::move(node));
  ++version_;
  return Operation(this, id);
}

Result<Operation> Graph::add_node_raw(Node n) {
  if (n.name.empty()) return invalid_argument("node of op '" + n.op + "' has no name");
  if (by_name_.count(n.name)) return Status(Code::already_exists, "duplicate node name '" + n.name + "'");
  for (const Endpoint& e : n.inputs) {
    if (e.node < 0 || e.node >= num_nodes())
      return invalid_argument("node '" + n.name + "': input refers to a missing node");
    if (e.index < 0 || e.index >= node(e.node).num_outputs())
      return invalid_argument("node '" + n.name + "': input refers to output " + std::to_string(e.index) + " of '" +
                              node(e.node).name + "', which has " + std::to_string(node(e.node).num_outputs()));
  }
  for (int c : n.control_inputs)
    if (c < 0 || c >= num_nodes()) return invalid_argument("node '" + n.name + "': control input refers to a missing node");
  auto node = std::make_unique<Node>(std::move(n));
  node->id = num_nodes();
  AF_RETURN_IF_ERROR(infer(*node));
  int id = node->id;
  by_name_[node->name] = id;
  name_counts_.emplace(node->name, 0);
  nodes_.push_back(std::move(node));
  ++version_;
  return Operation(this, id);
}

Status Graph::add_control_input(int node_id, int dep) {
  if (node_id < 0 || node_id >= num_nodes() || dep < 0 || dep >= num_nodes())
    return invalid_argument("add_control_input: node id out of range");
  Node& n = mutable_node(node_id);
  if (std::find(n.control_inputs.begin(), n.control_inputs.end(), dep) != n.control_inputs.end()) return Status::OK();
  n.control_inputs.push_back(dep);
  Status s = check_acyclic();
  if (!s.ok()) {
    n.control_inputs.pop_back();
    return s;
  }
  ++version_;
  return Status::OK();
}

std::vector<std::vector<int>> Graph::consumers() const {
  std::vector<std::vector<int>> out(nodes_.size());
  for (auto& n : nodes_) {
    for (auto& e : n->inputs) out[static_cast<size_t>(e.node)].push_back(n->id);
    for (int c : n->control_inputs) out[static_cast<size_t>(c)].push_back(n->id);
  }
  return out;
}

Result<std::vector<int>> Graph::topological_order() const {
  size_t n = nodes_.size();
  std::vector<int> pending(n, 0);
  auto cons = consumers();
  for (auto& node : nodes_) pending[static_cast<size_t>(node->id)] = static_cast<int>(node->inputs.size() + node->control_inputs.size());
  std::vector<int> ready, order;
  for (size_t i = 0; i < n; ++i)
    if (pending[i] == 0) ready.push_back(static_cast<int>(i));
  while (!ready.empty()) {
    int id = ready.back();
    ready.pop_back();
    order.push_back(id);
    for (int c : cons[static_cast<size_t>(id)])
      if (--pending[static_cast<size_t>(c)] == 0) ready.push_back(c);
  }
  if (order.size() != n) {
    for (size_t i = 0; i < n; ++i)
      if (pending[i] > 0)
        return invalid_argument("graph has a cycle through node '" + nodes_[i]->name + "'");
  }
  return order;
}

std::vector<int> Graph::prune(const std::vector<int>& targets) const {
  std::vector<char> seen(nodes_.size(), 0);
  std::vector<int> stack(targets.begin(), targets.end());
  while (!stack.empty()) {
    int id = stack.back();
    stack.pop_back();
    if (seen[static_cast<size_t>(id)]) continue;
    seen[static_cast<size_t>(id)] = 1;
    const Node& n = node(id);
    for (auto& e : n.inputs) stack.push_back(e.node);
    for (int c : n.control_inputs) stack.push_back(c);
  }
  std::vector<int> out;
  for (size_t i = 0; i < seen.size(); ++i)
    if (seen[i]) out.push_back(static_cast<int>(i));
  return out;
}

std::string Graph::to_string() const {
  std::ostringstream os;
  for (auto& n : nodes_) {
    os << n->name << " = " << n->op << "(";
    for (size_t i = 0; i < n->inputs.size(); ++i) {
      if (i) os << ", ";
      os << node(n->inputs[i].node).name;
      if (n->inputs[i].index) os << ":" << n->inputs[i].index;
    }
    for (int c : n->control_inputs) os << (n->inputs.empty() && c == n->control_inputs.front() ? "^" : ", ^") << node(c).name;
    os << ")";
    if (!n->attrs.empty()) {
      os << " {";
      bool first = true;
      for (auto& [k, v] : n->attrs) {
        os << (first ? "" : ", ") << k << "=" << v.to_string();
        first = false;
      }
      os << "}";
    }
    os << " ->";
    for (int i = 0; i < n->num_outputs(); ++i)
      os << " " << dtype_name(n->output_dtypes[static_cast<size_t>(i)]) << n->output_shapes[static_cast<size_t>(i)].to_string();
    if (!n->device.empty()) os << " @" << n->device;
    os << "\n";
  }
  return os.str();
}

}  // namespace actorflow
