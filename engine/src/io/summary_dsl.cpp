// The in-graph summary ops of the DSL (af::summary). The ops and their kernels are in
// ops/; here they are added by name, as every DSL function does.
#include "actorflow/dsl_core.h"
#include "actorflow/summary.h"
#include "dsl/dsl_build.h"

namespace actorflow::summary {
namespace {

// The tag is `name` under the current name scope, as the user wrote it; the name scope
// the op opens (for its tag constant, and the op's own name) is made unique as any scope.
// TF1's tf.summary.scalar would tag with the unique scope instead, so that a variable "w"
// makes the histogram "w" show up as "w_1"; the seeds' tf.histogram_summary("w", W)
// shows "w". Two summaries with one tag meet at MergeSummary, which rejects them.
// The root scope keeps the enclosing scope from being prefixed to the op name twice.
Output add_summary_op(const std::string& op, const std::string& tag_input, const std::string& name, const Output& values) {
  Graph& g = dsl::graph_of(values);
  if (name.empty()) throw Error(invalid_argument("summary::" + op + ": the name (the tag) is empty"));
  const std::string tag = g.current_name_scope() + name;
  std::string scope_name;
  Output tag_const;
  {
    NameScope scope(g, name);
    scope_name = g.current_name_scope();
    scope_name.pop_back();
    tag_const = constant(g, tag, tag_input);
  }
  Output out;
  {
    NameScope root(g, "/");
    out = dsl::add(g, op, scope_name, {tag_const, values});
  }
  g.add_to_collection(kCollection, out.node_id());
  return out;
}

}  // namespace

Output scalar(const std::string& name, const Output& value) {
  return add_summary_op("ScalarSummary", "tags", name, value);
}

Output histogram(const std::string& name, const Output& values) {
  return add_summary_op("HistogramSummary", "tag", name, values);
}

Output merge(const std::vector<Output>& summaries, const std::string& name) {
  if (summaries.empty()) throw Error(invalid_argument("summary::merge '" + name + "': no summaries to merge"));
  Graph& g = dsl::graph_of(summaries[0]);
  const size_t slash = name.rfind('/');
  if (slash == std::string::npos) return dsl::add(g, "MergeSummary", name, summaries);
  NameScope scope(g, name.substr(0, slash));
  return dsl::add(g, "MergeSummary", name.substr(slash + 1), summaries);
}

Output merge_all(Graph& g, const std::string& collection) {
  const std::vector<int>& ids = g.collection(collection);
  if (ids.empty()) return Output();
  std::vector<Output> summaries;
  for (int id : ids) summaries.emplace_back(&g, id, 0);
  return merge(summaries);
}

}  // namespace actorflow::summary
