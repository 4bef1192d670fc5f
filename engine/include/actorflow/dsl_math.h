// The C++ DSL, part 2: elementwise math with numpy broadcasting, matrix products,
// reductions, activations and comparisons.
#pragma once
#include "actorflow/api.h"
#include <string>
#include <vector>

#include "actorflow/graph.h"

AF_PUBLIC_BEGIN

namespace actorflow {

Output add(const Output& a, const Output& b, const std::string& name = "Add");
Output sub(const Output& a, const Output& b, const std::string& name = "Sub");
Output mul(const Output& a, const Output& b, const std::string& name = "Mul");
Output div(const Output& a, const Output& b, const std::string& name = "Div");
Output pow(const Output& a, const Output& b, const std::string& name = "Pow");
Output maximum(const Output& a, const Output& b, const std::string& name = "Maximum");
Output minimum(const Output& a, const Output& b, const std::string& name = "Minimum");
// Sum of any number of same-shaped tensors.
Output add_n(const std::vector<Output>& xs, const std::string& name = "AddN");

Output neg(const Output& x, const std::string& name = "Neg");
Output abs(const Output& x, const std::string& name = "Abs");
Output sign(const Output& x, const std::string& name = "Sign");
Output exp(const Output& x, const std::string& name = "Exp");
Output log(const Output& x, const std::string& name = "Log");
Output sqrt(const Output& x, const std::string& name = "Sqrt");
Output rsqrt(const Output& x, const std::string& name = "Rsqrt");
Output square(const Output& x, const std::string& name = "Square");

Output relu(const Output& x, const std::string& name = "Relu");
Output sigmoid(const Output& x, const std::string& name = "Sigmoid");
Output tanh(const Output& x, const std::string& name = "Tanh");
Output softplus(const Output& x, const std::string& name = "Softplus");
// Over the last axis.
Output softmax(const Output& x, const std::string& name = "Softmax");
Output log_softmax(const Output& x, const std::string& name = "LogSoftmax");

// Matrix product of the last two dims; leading dims are batch dims (broadcast).
Output matmul(const Output& a, const Output& b, bool transpose_a = false, bool transpose_b = false,
              const std::string& name = "MatMul");

// Reductions over `axes` (empty: all axes; negative axes count from the end).
Output reduce_sum(const Output& x, std::vector<int64_t> axes = {}, bool keepdims = false, const std::string& name = "Sum");
Output reduce_mean(const Output& x, std::vector<int64_t> axes = {}, bool keepdims = false, const std::string& name = "Mean");
Output reduce_max(const Output& x, std::vector<int64_t> axes = {}, bool keepdims = false, const std::string& name = "Max");
Output reduce_min(const Output& x, std::vector<int64_t> axes = {}, bool keepdims = false, const std::string& name = "Min");
Output reduce_prod(const Output& x, std::vector<int64_t> axes = {}, bool keepdims = false, const std::string& name = "Prod");
inline Output mean(const Output& x, std::vector<int64_t> axes = {}, bool keepdims = false) { return reduce_mean(x, std::move(axes), keepdims); }
inline Output sum(const Output& x, std::vector<int64_t> axes = {}, bool keepdims = false) { return reduce_sum(x, std::move(axes), keepdims); }
// Index (i64) of the largest / smallest element along `axis`.
Output argmax(const Output& x, int64_t axis = -1, const std::string& name = "ArgMax");
Output argmin(const Output& x, int64_t axis = -1, const std::string& name = "ArgMin");

Output equal(const Output& a, const Output& b, const std::string& name = "Equal");
Output not_equal(const Output& a, const Output& b, const std::string& name = "NotEqual");
Output less(const Output& a, const Output& b, const std::string& name = "Less");
Output less_equal(const Output& a, const Output& b, const std::string& name = "LessEqual");
Output greater(const Output& a, const Output& b, const std::string& name = "Greater");
Output greater_equal(const Output& a, const Output& b, const std::string& name = "GreaterEqual");
Output logical_and(const Output& a, const Output& b, const std::string& name = "LogicalAnd");
Output logical_or(const Output& a, const Output& b, const std::string& name = "LogicalOr");
Output logical_not(const Output& x, const std::string& name = "LogicalNot");
// Elementwise cond ? a : b with broadcasting of all three.
Output where(const Output& cond, const Output& a, const Output& b, const std::string& name = "Select");
inline Output select(const Output& cond, const Output& a, const Output& b) { return where(cond, a, b); }

// Operators. A plain number becomes a scalar constant of the other side's dtype.
Output operator+(const Output& a, const Output& b);
Output operator-(const Output& a, const Output& b);
Output operator*(const Output& a, const Output& b);
Output operator/(const Output& a, const Output& b);
Output operator-(const Output& a);
Output operator+(const Output& a, double b);
Output operator-(const Output& a, double b);
Output operator*(const Output& a, double b);
Output operator/(const Output& a, double b);
Output operator+(double a, const Output& b);
Output operator-(double a, const Output& b);
Output operator*(double a, const Output& b);
Output operator/(double a, const Output& b);
Output operator<(const Output& a, const Output& b);
Output operator<=(const Output& a, const Output& b);
Output operator>(const Output& a, const Output& b);
Output operator>=(const Output& a, const Output& b);
Output operator<(const Output& a, double b);
Output operator>(const Output& a, double b);
// Note: == and != are not overloaded (Outputs compare as handles); use equal().

}  // namespace actorflow

AF_PUBLIC_END
