// Op definitions: what an op takes and gives, its attributes with defaults, and its shape
// function. Registered statically from ops/ with AF_REGISTER_OP, as TF's REGISTER_OP.
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

// What a shape function sees while a node is being added.
class ShapeContext {
 public:
  ShapeContext(const Graph& g, Node& node) : graph_(g), node_(node) {}
  const Node& node() const { return node_; }
  const Graph& graph() const { return graph_; }
  int num_inputs() const { return static_cast<int>(node_.inputs.size()); }
  DType input_dtype(int i) const;
  const Shape& input_shape(int i) const;
  // The producer of input i, for error messages: "'x' (f32[2,3])".
  std::string describe_input(int i) const;
  // The value of input i when its producer is a Const node, else nullptr.
  const Tensor* input_constant(int i) const;
  void set_output(int i, DType dtype, Shape shape);
  // An invalid_argument error prefixed with the op and node name.
  Status error(const std::string& message) const;

 private:
  const Graph& graph_;
  Node& node_;
};

using ShapeFn = std::function<Status(ShapeContext&)>;

// Gradient functions are attached beside op definitions by the training layer; the
// type is opaque here so the registry stays independent of autodiff.
struct GradFnHolder;

struct OpDef {
  std::string name;
  int min_inputs = 0;
  int max_inputs = 0;     // -1: unbounded (variadic)
  int num_outputs = 1;    // -1: decided by the shape function
  bool stateful = false;  // never pruned as a duplicate, never constant-folded
  bool expensive = false; // a hint for the runtime: run on the device pool
  std::map<std::string, AttrValue> default_attrs;
  std::vector<std::string> required_attrs;
  // Attributes a node may carry without a default (absent: the op's usual behaviour),
  // e.g. compute_type, set by ComputeTypeScope (graph.h).
  std::vector<std::string> optional_attrs;
  ShapeFn shape_fn;
  std::shared_ptr<GradFnHolder> grad;
};

class OpRegistry {
 public:
  static OpRegistry& global();
  Status add(OpDef def);
  const OpDef* find(const std::string& name) const;
  std::vector<std::string> names() const;

 private:
  std::map<std::string, std::unique_ptr<OpDef>> defs_;
};

class OpDefBuilder {
 public:
  explicit OpDefBuilder(std::string name) { def_.name = std::move(name); }
  OpDefBuilder& inputs(int n) { def_.min_inputs = def_.max_inputs = n; return *this; }
  OpDefBuilder& inputs(int min, int max) { def_.min_inputs = min; def_.max_inputs = max; return *this; }
  OpDefBuilder& variadic_inputs(int min) { def_.min_inputs = min; def_.max_inputs = -1; return *this; }
  OpDefBuilder& outputs(int n) { def_.num_outputs = n; return *this; }
  OpDefBuilder& attr(const std::string& key, AttrValue dflt) { def_.default_attrs[key] = std::move(dflt); return *this; }
  OpDefBuilder& required_attr(const std::string& key) { def_.required_attrs.push_back(key); return *this; }
  OpDefBuilder& optional_attr(const std::string& key) { def_.optional_attrs.push_back(key); return *this; }
  OpDefBuilder& stateful() { def_.stateful = true; return *this; }
  OpDefBuilder& expensive() { def_.expensive = true; return *this; }
  OpDefBuilder& shape_fn(ShapeFn fn) { def_.shape_fn = std::move(fn); return *this; }
  OpDef& def() { return def_; }

 private:
  OpDef def_;
};

struct OpRegistrar {
  OpRegistrar(OpDefBuilder& b);           // NOLINT: implicit by design
  OpRegistrar(OpDefBuilder&& b) : OpRegistrar(b) {}
};

}  // namespace actorflow

#define AF_REGISTER_OP(name) \
  static ::actorflow::OpRegistrar AF_CONCAT(af_op_registrar_, __COUNTER__) = ::actorflow::OpDefBuilder(name)

AF_PUBLIC_END
