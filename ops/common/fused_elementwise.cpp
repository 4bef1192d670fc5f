#include "actorflow/ops/fused_elementwise.h"

#include <array>

namespace actorflow::fused_elementwise {
namespace {

constexpr std::array<OpInfo, 20> kOps{{
    {"Add", Code::add, 2},
    {"Sub", Code::sub, 2},
    {"Mul", Code::mul, 2},
    {"Div", Code::div, 2},
    {"Maximum", Code::maximum, 2},
    {"Minimum", Code::minimum, 2},
    {"SquaredDifference", Code::squared_difference, 2},
    {"Pow", Code::pow, 2},
    {"Neg", Code::neg, 1},
    {"Abs", Code::abs, 1},
    {"Sign", Code::sign, 1},
    {"Square", Code::square, 1},
    {"Relu", Code::relu, 1},
    {"Exp", Code::exp, 1},
    {"Log", Code::log, 1},
    {"Sqrt", Code::sqrt, 1},
    {"Rsqrt", Code::rsqrt, 1},
    {"Sigmoid", Code::sigmoid, 1},
    {"Tanh", Code::tanh, 1},
    {"Softplus", Code::softplus, 1},
}};

}  // namespace

const OpInfo* find_op(std::string_view op) {
  for (const OpInfo& i : kOps)
    if (i.op == op) return &i;
  return nullptr;
}

Result<Program> parse_program(const Node& n, int num_inputs) {
  const AttrValue* ops = n.find_attr("ops");
  const AttrValue* args = n.find_attr("args");
  if (!ops || !ops->is<AttrValue::Strings>()) return invalid_argument("attribute 'ops' must be a list of op names");
  if (!args || !args->is<AttrValue::Ints>()) return invalid_argument("attribute 'args' must be a list of ints");
  Program p;
  p.num_inputs = num_inputs;
  p.ops = ops->get<AttrValue::Strings>();
  const auto& slots = args->get<AttrValue::Ints>();
  if (p.ops.empty()) return invalid_argument("the program has no instructions");
  if (slots.size() != 2 * p.ops.size())
    return invalid_argument("attribute 'args' has " + std::to_string(slots.size()) + " slots for " +
                            std::to_string(p.ops.size()) + " instructions (two each)");
  if (const AttrValue* names = n.find_attr("names"); names && names->is<AttrValue::Strings>()) {
    p.names = names->get<AttrValue::Strings>();
    if (!p.names.empty() && p.names.size() != p.ops.size())
      return invalid_argument("attribute 'names' must name every instruction or none");
  }
  for (size_t i = 0; i < p.ops.size(); ++i) {
    const OpInfo* info = find_op(p.ops[i]);
    if (!info) return invalid_argument("instruction " + std::to_string(i) + ": op '" + p.ops[i] + "' cannot be fused");
    const int64_t limit = num_inputs + static_cast<int64_t>(i);
    const int64_t a = slots[2 * i], b = slots[2 * i + 1];
    const bool a_ok = a >= 0 && a < limit;
    const bool b_ok = info->arity == 1 ? b == -1 : b >= 0 && b < limit;
    if (!a_ok || !b_ok)
      return invalid_argument("instruction " + std::to_string(i) + " (" + p.ops[i] + ") reads slots " + std::to_string(a) +
                              " and " + std::to_string(b) + ": each must be an input (< " + std::to_string(num_inputs) +
                              ") or an earlier result (< " + std::to_string(limit) + ")" +
                              (info->arity == 1 ? ", and b -1 for a unary op" : ""));
    p.code.push_back({info->code, static_cast<int>(a), static_cast<int>(b)});
  }
  return p;
}

}  // namespace actorflow::fused_elementwise
