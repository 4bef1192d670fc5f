// embedding_lookup across the shards of a partitioned variable, as TF1's
// embedding_ops._embedding_lookup_and_transform builds it: each id is assigned a shard
// and a row in it, the ids are split by shard (dynamic_partition), gathered where each
// shard lives, and the rows stitched back in the order of the ids (dynamic_stitch).
#include <optional>

#include "actorflow/dsl_array.h"
#include "actorflow/dsl_core.h"
#include "actorflow/dsl_data_flow.h"
#include "actorflow/dsl_math.h"
#include "actorflow/partitioned_variables.h"
#include "dsl/dsl_build.h"

namespace actorflow {
namespace {

// Ids are non-negative, where truncating integer division (Div) is floor division: a
// negative id lands outside [0, p) as a shard or outside its shard as a row, and the
// step fails there, as TF's lookup fails on one.
Output floordiv(const Output& x, int64_t d) { return x / scalar_like(*x.graph(), x.dtype(), static_cast<double>(d)); }
Output floormod(const Output& x, int64_t d) {
  return x - floordiv(x, d) * scalar_like(*x.graph(), x.dtype(), static_cast<double>(d));
}

}  // namespace

Output embedding_lookup(const std::vector<Output>& params, const Output& ids, const std::string& partition_strategy,
                        const std::string& name) {
  const std::string what = "embedding_lookup '" + name + "': ";
  if (params.empty()) throw Error(invalid_argument(what + "needs at least one shard"));
  if (partition_strategy != "mod" && partition_strategy != "div")
    throw Error(invalid_argument(what + "partition_strategy must be \"mod\" or \"div\", got \"" + partition_strategy + "\""));
  Graph& g = dsl::graph_of(ids);
  if (ids.dtype() != DType::i32 && ids.dtype() != DType::i64)
    throw Error(invalid_argument(what + "ids " + ids.name() + " must be int32 or int64, got " + dtype_name(ids.dtype())));
  const int64_t np = static_cast<int64_t>(params.size());
  std::vector<int64_t> row_dims;
  int64_t total_rows = 0;
  for (int64_t p = 0; p < np; ++p) {
    const Output& shard = params[static_cast<size_t>(p)];
    throw_if_error(g.check_owns(shard, what + "shard " + std::to_string(p)));
    const Shape& s = shard.shape();
    if (!s.has_rank() || s.rank() < 1 || s.dim(0) < 0)
      throw Error(invalid_argument(what + "shard " + shard.name() + " " + s.to_string() + " needs a known first dim"));
    std::vector<int64_t> rows(s.dims().begin() + 1, s.dims().end());
    if (p == 0) row_dims = rows;
    else if (rows != row_dims || shard.dtype() != params[0].dtype())
      throw Error(invalid_argument(what + "shard " + shard.name() + " " + s.to_string() + " does not match shard " +
                                   params[0].name() + " " + params[0].shape().to_string()));
    total_rows += s.dim(0);
  }
  NameScope scope(g, name);
  // A gather runs where its shard lives (TF colocates it with the shard).
  auto gather_on = [&](const Output& shard, const Output& at) {
    std::optional<DeviceScope> on_shard;
    if (!shard.node().device.empty()) on_shard.emplace(g, shard.node().device);
    return gather(shard, at, 0, "Gather");
  };
  if (np == 1) return gather_on(params[0], ids);

  const Shape& ids_shape = ids.shape();
  int unknown = 0;
  if (ids_shape.has_rank())
    for (int64_t d : ids_shape.dims()) unknown += d < 0 ? 1 : 0;
  if (!ids_shape.has_rank() || unknown > 1)
    throw Error(invalid_argument(what + "ids " + ids.name() + " " + ids_shape.to_string() +
                                 " need a known rank and at most one unknown dim"));
  for (int64_t d : row_dims)
    if (d < 0) throw Error(invalid_argument(what + "the shards' rows " + params[0].shape().to_string() + " need known dims"));

  Output flat = reshape(ids, Shape{-1}, "Reshape");
  Output n = cast(reshape(shape_of(flat), Shape{}, "size"), DType::i32);
  Output original_indices = range(constant(g, 0, "start"), n, constant(g, 1, "delta"));
  Output assignments, new_ids;
  if (partition_strategy == "mod") {
    assignments = floormod(flat, np);
    new_ids = floordiv(flat, np);
  } else {
    // Ids [0, total) in consecutive ranges, the first `extras` shards one row longer.
    const int64_t per = total_rows / np, extras = total_rows % np;
    if (per == 0)
      throw Error(invalid_argument(what + "\"div\" over " + std::to_string(np) + " shards needs at least as many rows, got " +
                                   std::to_string(total_rows)));
    Output past = flat - scalar_like(g, flat.dtype(), static_cast<double>(extras), "extras");
    assignments = maximum(floordiv(flat, per + 1), floordiv(past, per));
    Output in_long = less(assignments, scalar_like(g, flat.dtype(), static_cast<double>(extras), "num_long"));
    new_ids = where(in_long, floormod(flat, per + 1), floormod(past, per));
  }
  Output p32 = cast(assignments, DType::i32);
  std::vector<Output> gather_ids = dynamic_partition(new_ids, p32, np);
  std::vector<Output> positions = dynamic_partition(original_indices, p32, np);
  std::vector<Output> rows;
  for (int64_t p = 0; p < np; ++p) rows.push_back(gather_on(params[static_cast<size_t>(p)], gather_ids[static_cast<size_t>(p)]));
  Output merged = dynamic_stitch(positions, rows);
  if (ids_shape.rank() == 1 && unknown == 1) return merged;
  std::vector<int64_t> dims = ids_shape.dims();
  dims.insert(dims.end(), row_dims.begin(), row_dims.end());
  return reshape(merged, Shape(std::move(dims)), "Reshape_1");
}

Output embedding_lookup(const PartitionedVariable& params, const Output& ids, const std::string& partition_strategy,
                        const std::string& name) {
  if (params.num_parts() > 1 && params.axis() != 0)
    throw Error(invalid_argument("embedding_lookup '" + name + "': '" + params.name() + "' is split along axis " +
                                 std::to_string(params.axis()) + "; a lookup needs shards of rows (axis 0)"));
  return embedding_lookup(params.parts(), ids, partition_strategy, name);
}

}  // namespace actorflow
