#include "actorflow/dsl_array.h"
#include "dsl/dsl_build.h"

namespace actorflow {

using dsl::add;
using dsl::graph_of;

Output reshape(const Output& x, Shape shape, const std::string& name) {
  return add(graph_of(x), "Reshape", name, {x}, {{"shape", std::move(shape)}});
}
Output transpose(const Output& x, std::vector<int64_t> perm, const std::string& name) {
  return add(graph_of(x), "Transpose", name, {x}, {{"perm", AttrValue::Ints(std::move(perm))}});
}
Output expand_dims(const Output& x, int64_t axis, const std::string& name) {
  return add(graph_of(x), "ExpandDims", name, {x}, {{"axis", axis}});
}
Output squeeze(const Output& x, std::vector<int64_t> axes, const std::string& name) {
  return add(graph_of(x), "Squeeze", name, {x}, {{"axes", AttrValue::Ints(std::move(axes))}});
}
Output concat(const std::vector<Output>& xs, int64_t axis, const std::string& name) {
  if (xs.empty()) throw Error(invalid_argument("concat '" + name + "': needs at least one input"));
  return add(graph_of(xs[0]), "Concat", name, xs, {{"axis", axis}});
}

namespace {
std::vector<Output> split_impl(const Output& x, std::map<std::string, AttrValue> attrs, const std::string& op,
                               const std::string& name) {
  NodeSpec spec;
  spec.op = op;
  spec.name = name;
  spec.inputs = {x};
  spec.attrs = std::move(attrs);
  Operation o = dsl::add_op(graph_of(x), std::move(spec));
  std::vector<Output> outs;
  for (int i = 0; i < o.node().num_outputs(); ++i) outs.push_back(o.output(i));
  return outs;
}
}  // namespace

std::vector<Output> split(const Output& x, int64_t num, int64_t axis, const std::string& name) {
  return split_impl(x, {{"num_split", num}, {"axis", axis}}, "Split", name);
}
std::vector<Output> split(const Output& x, std::vector<int64_t> sizes, int64_t axis, const std::string& name) {
  return split_impl(x, {{"sizes", AttrValue::Ints(std::move(sizes))}, {"axis", axis}}, "SplitV", name);
}
Output slice(const Output& x, std::vector<int64_t> begin, std::vector<int64_t> size, const std::string& name) {
  return add(graph_of(x), "Slice", name, {x}, {{"begin", AttrValue::Ints(std::move(begin))}, {"size", AttrValue::Ints(std::move(size))}});
}
Output gather(const Output& params, const Output& indices, int64_t axis, const std::string& name) {
  return add(graph_of(params), "Gather", name, {params, indices}, {{"axis", axis}});
}
Output one_hot(const Output& indices, int64_t depth, double on, double off, DType dtype, const std::string& name) {
  return add(graph_of(indices), "OneHot", name, {indices},
             {{"depth", depth}, {"on_value", on}, {"off_value", off}, {"dtype", dtype}});
}
Output tile(const Output& x, std::vector<int64_t> multiples, const std::string& name) {
  return add(graph_of(x), "Tile", name, {x}, {{"multiples", AttrValue::Ints(std::move(multiples))}});
}
Output pad(const Output& x, std::vector<std::pair<int64_t, int64_t>> paddings, double value, const std::string& name) {
  AttrValue::Ints flat;
  for (auto& [b, a] : paddings) {
    flat.push_back(b);
    flat.push_back(a);
  }
  return add(graph_of(x), "Pad", name, {x}, {{"paddings", flat}, {"constant_value", value}});
}

}  // namespace actorflow
