#include "actorflow/dsl_data_flow.h"

#include "dsl/dsl_build.h"

namespace actorflow {

std::vector<Output> dynamic_partition(const Output& data, const Output& partitions, int64_t num_partitions,
                                      const std::string& name) {
  Graph& g = dsl::graph_of(data);
  NodeSpec spec;
  spec.op = "DynamicPartition";
  spec.name = name;
  spec.inputs = {data, partitions};
  spec.attrs = {{"num_partitions", num_partitions}};
  Operation op = dsl::add_op(g, std::move(spec));
  std::vector<Output> outs;
  for (int i = 0; i < op.node().num_outputs(); ++i) outs.push_back(op.output(i));
  return outs;
}

Output dynamic_stitch(const std::vector<Output>& indices, const std::vector<Output>& data, const std::string& name) {
  if (indices.empty() || indices.size() != data.size())
    throw Error(invalid_argument("dynamic_stitch '" + name + "': needs as many data tensors as index tensors (" +
                                 std::to_string(indices.size()) + " and " + std::to_string(data.size()) +
                                 "), at least one"));
  std::vector<Output> inputs = indices;
  inputs.insert(inputs.end(), data.begin(), data.end());
  return dsl::add(dsl::graph_of(indices[0]), "DynamicStitch", name, std::move(inputs));
}

Output range(const Output& start, const Output& limit, const Output& delta, const std::string& name) {
  return dsl::add(dsl::graph_of(start), "Range", name, {start, limit, delta});
}

}  // namespace actorflow
