// Partitioners, shard variables with their save_slice_info, and get_variable with a
// partitioner, following TF1's partitioned_variables.py and variable_scope.py.
#include "actorflow/partitioned_variables.h"

#include <algorithm>
#include <optional>

#include "actorflow/dsl_array.h"
#include "actorflow/dsl_core.h"
#include "dsl/variable_build.h"

namespace actorflow {
namespace {

// Where a shard records its slice: attributes of its VariableV2 node, so that they travel
// with the GraphDef. Its own shape is the slice's shape.
constexpr const char* kFullName = "_save_slice_info_full_name";
constexpr const char* kFullShape = "_save_slice_info_full_shape";
constexpr const char* kVarOffset = "_save_slice_info_var_offset";

void check_axis(const char* who, int axis, const Shape& shape) {
  if (axis < 0 || axis >= shape.rank())
    throw Error(invalid_argument(std::string(who) + ": axis " + std::to_string(axis) + " is out of range for shape " +
                                 shape.to_string()));
}

std::string ints_text(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

}  // namespace

Partitioner fixed_size_partitioner(int64_t num_shards, int axis) {
  if (num_shards < 1)
    throw Error(invalid_argument("fixed_size_partitioner: num_shards must be at least 1, got " + std::to_string(num_shards)));
  return [num_shards, axis](const Shape& shape, DType) {
    check_axis("fixed_size_partitioner", axis, shape);
    std::vector<int64_t> parts(static_cast<size_t>(shape.rank()), 1);
    parts[static_cast<size_t>(axis)] = std::min(num_shards, shape.dim(axis));
    return parts;
  };
}

Partitioner min_max_variable_partitioner(int64_t max_partitions, int axis, int64_t min_slice_size,
                                         int64_t bytes_per_string_element) {
  if (max_partitions < 1)
    throw Error(invalid_argument("min_max_variable_partitioner: max_partitions must be at least 1, got " +
                                 std::to_string(max_partitions)));
  if (min_slice_size < 1)
    throw Error(invalid_argument("min_max_variable_partitioner: min_slice_size must be at least 1 byte, got " +
                                 std::to_string(min_slice_size)));
  return [=](const Shape& shape, DType dtype) {
    check_axis("min_max_variable_partitioner", axis, shape);
    const int64_t elem = dtype == DType::string ? bytes_per_string_element : static_cast<int64_t>(dtype_size(dtype));
    const int64_t total = shape.num_elements() * elem;
    const int64_t wanted = (total + min_slice_size - 1) / min_slice_size;  // ceil(total / min_slice_size)
    std::vector<int64_t> parts(static_cast<size_t>(shape.rank()), 1);
    parts[static_cast<size_t>(axis)] = std::max<int64_t>(1, std::min({shape.dim(axis), max_partitions, wanted}));
    return parts;
  };
}

std::string SaveSliceInfo::spec() const {
  std::string s;
  for (int64_t d : full_shape) s += std::to_string(d) + " ";
  for (size_t i = 0; i < var_offset.size(); ++i)
    s += (i ? ":" : "") + std::to_string(var_offset[i]) + "," + std::to_string(var_shape[i]);
  return s;
}

std::optional<SaveSliceInfo> save_slice_info(const Output& var) {
  if (!var.valid() || var.node().op != "VariableV2" || !var.node().has_attr(kFullName)) return std::nullopt;
  const Node& n = var.node();
  SaveSliceInfo info;
  info.full_name = n.attr_string(kFullName);
  info.full_shape = n.attr_ints(kFullShape);
  info.var_offset = n.attr_ints(kVarOffset);
  info.var_shape = var.shape().dims();
  return info;
}

std::vector<int64_t> PartitionedVariable::partitions() const {
  std::vector<int64_t> p(static_cast<size_t>(shape_.rank()), 1);
  p[static_cast<size_t>(axis_)] = num_parts();
  return p;
}

Output PartitionedVariable::value() const {
  Graph& g = *parts_.at(0).graph();
  NameScope root(g, "/");
  if (parts_.size() == 1) return identity(parts_[0], name_);
  return concat(parts_, axis_, name_);
}

PartitionedVariable get_variable(Graph& g, const std::string& name, Shape shape, const Initializer& init,
                                 const Partitioner& partitioner, bool trainable) {
  const Graph::VarScope& scope = g.variable_scope();
  const std::string full = scope.name.empty() ? name : scope.name + "/" + name;
  const std::string what = "get_variable '" + full + "': ";
  if (!partitioner) throw Error(invalid_argument(what + "the partitioner is empty"));
  if (!shape.is_fully_defined() || shape.rank() < 1)
    throw Error(invalid_argument(what + "a partitioned variable needs a fully defined shape of rank >= 1, got " +
                                 shape.to_string()));
  const std::vector<int64_t> parts = partitioner(shape, init.dtype);
  if (parts.size() != static_cast<size_t>(shape.rank()))
    throw Error(invalid_argument(what + "the partitioner gave " + ints_text(parts) + ", not one count per dim of " +
                                 shape.to_string()));
  int axis = -1;
  for (int i = 0; i < shape.rank(); ++i) {
    const int64_t p = parts[static_cast<size_t>(i)];
    if (p < 1) throw Error(invalid_argument(what + "the partitioner gave " + ints_text(parts) + "; every count must be >= 1"));
    if (p == 1) continue;
    if (axis >= 0)
      throw Error(invalid_argument(what + "the partitioner gave " + ints_text(parts) +
                                   "; a variable can be split along one dim only"));
    axis = i;
  }
  if (axis < 0) axis = 0;  // one shard: TF's degenerate case, still "<name>/part_0"
  const int64_t num = parts[static_cast<size_t>(axis)];
  const int64_t dim = shape.dim(axis);
  if (num > dim)
    throw Error(invalid_argument(what + "cannot split dim " + std::to_string(axis) + " of " + shape.to_string() +
                                 " into " + std::to_string(num) + " parts"));
  if (g.stored_variable(full) >= 0)
    throw Error(Status(Code::already_exists,
                       what + "a partitioner was given, but an unpartitioned variable of that name exists"));

  if (g.stored_variable(full + "/part_0") >= 0) {
    if (scope.reuse != VarReuse::reuse && scope.reuse != VarReuse::auto_reuse)
      throw Error(Status(Code::already_exists,
                         what + "the partitioned variable already exists; open its VariableScope with reuse = true "
                                "(or VarReuse::auto_reuse) to share it"));
    std::vector<Output> found;
    for (int i = 0;; ++i) {
      const int id = g.stored_variable(full + "/part_" + std::to_string(i));
      if (id < 0) break;
      found.emplace_back(&g, id);
    }
    std::optional<SaveSliceInfo> info = save_slice_info(found[0]);
    const Shape existing = info ? Shape(info->full_shape) : Shape::unknown_rank();
    if (existing != shape || found[0].dtype() != init.dtype)
      throw Error(invalid_argument(what + "trying to share the partitioned variable of " + dtype_name(found[0].dtype()) +
                                   existing.to_string() + " as " + dtype_name(init.dtype) + shape.to_string()));
    int found_axis = 0;
    for (int i = 0; i < shape.rank(); ++i)
      if (found[0].shape().dim(i) != shape.dim(i)) found_axis = i;
    PartitionedVariable existing_var(full, init.dtype, shape, found.size() > 1 ? found_axis : axis, found);
    if (existing_var.partitions() != parts)
      throw Error(invalid_argument(what + "trying to share the partitioned variable with partitions " +
                                   ints_text(existing_var.partitions()) + " as " + ints_text(parts)));
    return existing_var;
  }
  if (scope.reuse == VarReuse::reuse)
    throw Error(not_found(what + "the partitioned variable does not exist; a VariableScope with reuse = true only "
                                 "shares existing variables (VarReuse::auto_reuse also creates missing ones)"));

  // TF's split: the first dim % num shards take one row more.
  std::vector<Output> made;
  int64_t offset = 0;
  for (int64_t i = 0; i < num; ++i) {
    std::vector<int64_t> dims = shape.dims();
    dims[static_cast<size_t>(axis)] = dim / num + (i < dim % num ? 1 : 0);
    const Shape part(dims);
    const std::string part_name = full + "/part_" + std::to_string(i);
    if (g.peek_unique_name(part_name) != part_name)
      throw Error(Status(Code::already_exists, what + "the name '" + part_name + "' is taken by a node get_variable did not make"));
    std::vector<int64_t> var_offset(static_cast<size_t>(shape.rank()), 0);
    var_offset[static_cast<size_t>(axis)] = offset;
    Output var;
    {
      // Variable scopes alone name the variable: the enclosing name scopes do not count.
      NameScope root(g, "/");
      var = add_variable(
          g, init.dtype, part, part_name,
          [&] { return initial_value_slice(g, init, shape, axis, offset, part, "Initializer"); }, trainable,
          {{kFullName, full}, {kFullShape, AttrValue::Ints(shape.dims())}, {kVarOffset, AttrValue::Ints(var_offset)}});
    }
    g.store_variable(part_name, var.node_id());
    made.push_back(var);
    offset += dims[static_cast<size_t>(axis)];
  }
  return PartitionedVariable(full, init.dtype, shape, axis, std::move(made));
}

}  // namespace actorflow
