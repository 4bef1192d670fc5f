#include "actorflow/dsl_core.h"
#include "actorflow/dsl_math.h"
#include "dsl/dsl_build.h"

namespace actorflow {

using dsl::add;
using dsl::graph_of;

namespace {
Output binary(const char* op, const Output& a, const Output& b, const std::string& name) {
  return add(graph_of(a), op, name, {a, b});
}
Output unary(const char* op, const Output& x, const std::string& name) { return add(graph_of(x), op, name, {x}); }
Output reduction(const char* op, const Output& x, std::vector<int64_t> axes, bool keepdims, const std::string& name) {
  return add(graph_of(x), op, name, {x}, {{"axes", AttrValue::Ints(std::move(axes))}, {"keepdims", keepdims}});
}
Output num(const Output& like, double v) { return scalar_like(graph_of(like), like.dtype(), v); }
}  // namespace

Output add(const Output& a, const Output& b, const std::string& name) { return binary("Add", a, b, name); }
Output sub(const Output& a, const Output& b, const std::string& name) { return binary("Sub", a, b, name); }
Output mul(const Output& a, const Output& b, const std::string& name) { return binary("Mul", a, b, name); }
Output div(const Output& a, const Output& b, const std::string& name) { return binary("Div", a, b, name); }
Output pow(const Output& a, const Output& b, const std::string& name) { return binary("Pow", a, b, name); }
Output maximum(const Output& a, const Output& b, const std::string& name) { return binary("Maximum", a, b, name); }
Output minimum(const Output& a, const Output& b, const std::string& name) { return binary("Minimum", a, b, name); }
Output add_n(const std::vector<Output>& xs, const std::string& name) {
  if (xs.empty()) throw Error(invalid_argument("add_n '" + name + "': needs at least one input"));
  return add(graph_of(xs[0]), "AddN", name, xs);
}

Output neg(const Output& x, const std::string& name) { return unary("Neg", x, name); }
Output abs(const Output& x, const std::string& name) { return unary("Abs", x, name); }
Output sign(const Output& x, const std::string& name) { return unary("Sign", x, name); }
Output exp(const Output& x, const std::string& name) { return unary("Exp", x, name); }
Output log(const Output& x, const std::string& name) { return unary("Log", x, name); }
Output sqrt(const Output& x, const std::string& name) { return unary("Sqrt", x, name); }
Output rsqrt(const Output& x, const std::string& name) { return unary("Rsqrt", x, name); }
Output square(const Output& x, const std::string& name) { return unary("Square", x, name); }
Output relu(const Output& x, const std::string& name) { return unary("Relu", x, name); }
Output sigmoid(const Output& x, const std::string& name) { return unary("Sigmoid", x, name); }
Output tanh(const Output& x, const std::string& name) { return unary("Tanh", x, name); }
Output softplus(const Output& x, const std::string& name) { return unary("Softplus", x, name); }
Output softmax(const Output& x, const std::string& name) { return unary("Softmax", x, name); }
Output log_softmax(const Output& x, const std::string& name) { return unary("LogSoftmax", x, name); }

Output matmul(const Output& a, const Output& b, bool ta, bool tb, const std::string& name) {
  return add(graph_of(a), "MatMul", name, {a, b}, {{"transpose_a", ta}, {"transpose_b", tb}});
}

Output reduce_sum(const Output& x, std::vector<int64_t> axes, bool k, const std::string& n) { return reduction("Sum", x, std::move(axes), k, n); }
Output reduce_mean(const Output& x, std::vector<int64_t> axes, bool k, const std::string& n) { return reduction("Mean", x, std::move(axes), k, n); }
Output reduce_max(const Output& x, std::vector<int64_t> axes, bool k, const std::string& n) { return reduction("Max", x, std::move(axes), k, n); }
Output reduce_min(const Output& x, std::vector<int64_t> axes, bool k, const std::string& n) { return reduction("Min", x, std::move(axes), k, n); }
Output reduce_prod(const Output& x, std::vector<int64_t> axes, bool k, const std::string& n) { return reduction("Prod", x, std::move(axes), k, n); }
Output argmax(const Output& x, int64_t axis, const std::string& name) { return add(graph_of(x), "ArgMax", name, {x}, {{"axis", axis}}); }
Output argmin(const Output& x, int64_t axis, const std::string& name) { return add(graph_of(x), "ArgMin", name, {x}, {{"axis", axis}}); }

Output equal(const Output& a, const Output& b, const std::string& name) { return binary("Equal", a, b, name); }
Output not_equal(const Output& a, const Output& b, const std::string& name) { return binary("NotEqual", a, b, name); }
Output less(const Output& a, const Output& b, const std::string& name) { return binary("Less", a, b, name); }
Output less_equal(const Output& a, const Output& b, const std::string& name) { return binary("LessEqual", a, b, name); }
Output greater(const Output& a, const Output& b, const std::string& name) { return binary("Greater", a, b, name); }
Output greater_equal(const Output& a, const Output& b, const std::string& name) { return binary("GreaterEqual", a, b, name); }
Output logical_and(const Output& a, const Output& b, const std::string& name) { return binary("LogicalAnd", a, b, name); }
Output logical_or(const Output& a, const Output& b, const std::string& name) { return binary("LogicalOr", a, b, name); }
Output logical_not(const Output& x, const std::string& name) { return unary("LogicalNot", x, name); }
Output where(const Output& c, const Output& a, const Output& b, const std::string& name) {
  return add(graph_of(c), "Select", name, {c, a, b});
}

Output operator+(const Output& a, const Output& b) { return add(a, b); }
Output operator-(const Output& a, const Output& b) { return sub(a, b); }
Output operator*(const Output& a, const Output& b) { return mul(a, b); }
Output operator/(const Output& a, const Output& b) { return div(a, b); }
Output operator-(const Output& a) { return neg(a); }
Output operator+(const Output& a, double b) { return add(a, num(a, b)); }
Output operator-(const Output& a, double b) { return sub(a, num(a, b)); }
Output operator*(const Output& a, double b) { return mul(a, num(a, b)); }
Output operator/(const Output& a, double b) { return div(a, num(a, b)); }
Output operator+(double a, const Output& b) { return add(num(b, a), b); }
Output operator-(double a, const Output& b) { return sub(num(b, a), b); }
Output operator*(double a, const Output& b) { return mul(num(b, a), b); }
Output operator/(double a, const Output& b) { return div(num(b, a), b); }
Output operator<(const Output& a, const Output& b) { return less(a, b); }
Output operator<=(const Output& a, const Output& b) { return less_equal(a, b); }
Output operator>(const Output& a, const Output& b) { return greater(a, b); }
Output operator>=(const Output& a, const Output& b) { return greater_equal(a, b); }
Output operator<(const Output& a, double b) { return less(a, num(a, b)); }
Output operator>(const Output& a, double b) { return greater(a, num(a, b)); }

}  // namespace actorflow
