#include "run_placement.h"

#include <algorithm>

#include "cheap_ops.h"

namespace actorflow::runtime {
namespace {

std::vector<std::vector<int>> consumers_of(const std::vector<std::vector<int>>& producers) {
  std::vector<std::vector<int>> consumers(producers.size());
  for (size_t i = 0; i < producers.size(); ++i)
    for (int p : producers[i])
      if (p >= 0) consumers[static_cast<size_t>(p)].push_back(static_cast<int>(i));
  return consumers;
}

}  // namespace

Result<std::vector<int>> topological_order(const std::vector<std::vector<int>>& producers) {
  size_t n = producers.size();
  std::vector<int> missing(n, 0);
  for (size_t i = 0; i < n; ++i)
    for (int p : producers[i]) missing[i] += p >= 0 ? 1 : 0;
  auto consumers = consumers_of(producers);
  std::vector<int> order;
  order.reserve(n);
  for (size_t i = 0; i < n; ++i)
    if (missing[i] == 0) order.push_back(static_cast<int>(i));
  for (size_t k = 0; k < order.size(); ++k)
    for (int c : consumers[static_cast<size_t>(order[k])])
      if (--missing[static_cast<size_t>(c)] == 0) order.push_back(c);
  if (order.size() != n) return internal_error("the step plan has a cycle");
  return order;
}

bool is_serial(const std::vector<NodeRuntime>& nodes, const std::vector<int>& order,
               const std::vector<std::vector<int>>& producers, const std::vector<char>& cheap,
               const std::vector<char>& inert) {
  // Beyond this the reachability checks cost more than the plan is worth.
  constexpr size_t kMaxNodes = 4096;
  size_t n = nodes.size();
  if (n > kMaxNodes) return false;
  std::vector<int> heavy;
  for (int i : order) {
    auto u = static_cast<size_t>(i);
    if (inert[u]) continue;
    if (!is_stateless_sync(*nodes[u].node, *nodes[u].kernel)) return false;
    if (!cheap[u]) heavy.push_back(i);
  }
  if (heavy.empty()) return false;
  auto consumers = consumers_of(producers);
  // Consecutive heavy nodes (in topological order) joined by a path join them all.
  std::vector<size_t> seen(n, SIZE_MAX);
  std::vector<int> stack;
  for (size_t k = 0; k + 1 < heavy.size(); ++k) {
    int to = heavy[k + 1];
    bool found = false;
    stack.assign(1, heavy[k]);
    while (!stack.empty() && !found) {
      int u = stack.back();
      stack.pop_back();
      for (int c : consumers[static_cast<size_t>(u)]) {
        found = found || c == to;
        if (seen[static_cast<size_t>(c)] == k) continue;
        seen[static_cast<size_t>(c)] = k;
        stack.push_back(c);
      }
    }
    if (!found) return false;
  }
  return true;
}

namespace {

constexpr int64_t kAssumedDim = 64;

double elements(const Shape& s) {
  if (!s.has_rank()) return static_cast<double>(kAssumedDim);
  double n = 1;
  for (int64_t d : s.dims()) n *= static_cast<double>(d < 0 ? kAssumedDim : d);
  return n;
}

int64_t dim_or(const Shape& s, int i) {
  if (!s.has_rank() || i < 0 || i >= s.rank()) return kAssumedDim;
  int64_t d = s.dim(i);
  return d < 0 ? kAssumedDim : d;
}

// A filter [kh, kw, cin, cout]'s multiply-adds per output element: kh * kw * cin.
double per_output(const Shape& filter) { return static_cast<double>(dim_or(filter, 0) * dim_or(filter, 1) * dim_or(filter, 2)); }

}  // namespace

double estimated_cost(const Node& node, const std::vector<Shape>& inputs) {
  auto in = [&](size_t i) { return i < inputs.size() ? inputs[i] : Shape::unknown_rank(); };
  const Shape out = node.output_shapes.empty() ? Shape::unknown_rank() : node.output_shapes[0];
  const std::string& op = node.op;
  if (op == "MatMul" || op == "_FusedMatMul") {
    const Shape a = in(0);
    const int r = a.has_rank() ? a.rank() : 2;
    const bool ta = node.attr_bool("transpose_a");
    const int64_t k = dim_or(a, ta ? r - 2 : r - 1);
    return elements(out) * static_cast<double>(k);
  }
  if (op == "Conv2D" || op == "Conv2DBackpropInput") return elements(op == "Conv2D" ? out : in(2)) * per_output(in(1));
  if (op == "Conv2DBackpropFilter") return elements(in(2)) * per_output(out);
  if (inputs.empty() || is_metadata_op(op)) return 1;
  double touched = 0;
  for (const Shape& s : inputs) touched += elements(s);
  for (const Shape& s : node.output_shapes) touched += elements(s);
  return 8 * touched;
}

bool is_mostly_serial(const std::vector<NodeRuntime>& nodes, const std::vector<int>& order,
                      const std::vector<std::vector<int>>& producers, const std::vector<double>& cost,
                      const std::vector<char>& inert, double min_fraction) {
  // The costliest path ending at each node, in topological order.
  std::vector<double> longest(nodes.size(), 0);
  double total = 0, critical = 0;
  for (int i : order) {
    auto u = static_cast<size_t>(i);
    if (inert[u]) continue;
    if (nodes[u].kernel->as_async()) return false;
    double before = 0;
    for (int p : producers[u])
      if (p >= 0) before = std::max(before, longest[static_cast<size_t>(p)]);
    longest[u] = before + cost[u];
    total += cost[u];
    critical = std::max(critical, longest[u]);
  }
  return total > 0 && critical >= min_fraction * total;
}

void colocate_cheap_nodes(std::vector<NodeRuntime>& nodes, const std::vector<int>& order,
                          const std::vector<std::vector<int>>& producers, const std::vector<char>& cheap,
                          const std::vector<char>& fed, const std::function<bool(const Node&, const Node&)>& encoded) {
  for (int i : order) {
    auto u = static_cast<size_t>(i);
    NodeRuntime& rt = nodes[u];
    if (!cheap[u] || fed[u]) continue;
    int head = -1;
    bool ok = true;
    for (int p : producers[u]) {
      if (p < 0) continue;
      const NodeRuntime& prt = nodes[static_cast<size_t>(p)];
      if (head < 0) head = prt.head;
      ok = ok && head == prt.head && !encoded(*prt.node, *rt.node);
    }
    if (!ok || head < 0 || nodes[static_cast<size_t>(head)].kernel->as_async()) continue;
    NodeRuntime& hrt = nodes[static_cast<size_t>(head)];
    rt.head = head;
    rt.member_pos = static_cast<int>(hrt.members.size());
    hrt.members.push_back(i);
  }
}

}  // namespace actorflow::runtime
