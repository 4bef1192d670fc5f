// The program a _FusedElementwise node runs (ops/defs/fused_elementwise_ops.cpp): the
// ops it can hold, and its attributes read back and checked. Shared by the plan-time
// fusion pass that writes such nodes (actors/src/elementwise_fusion.cpp), the op's shape
// function and its CPU kernel, so the three agree on what a program may contain.
//
// Attributes: "ops", the op of each instruction in evaluation order ("Add", "Relu", ...);
// "args", two operand slots per instruction (b = -1 for unary ops), where slot k <
// num_inputs is input k and slot num_inputs + j the result of instruction j < this one;
// "names", optional, the name of the node each instruction replaces (for messages). The
// last instruction's result is the node's output.
#pragma once
#include "actorflow/api.h"
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "actorflow/graph.h"
#include "actorflow/status.h"

AF_PUBLIC_BEGIN

namespace actorflow::fused_elementwise {

enum class Code : uint8_t {
  add, sub, mul, div, maximum, minimum, squared_difference, pow,  // binary
  neg, abs, sign, square, relu, exp, log, sqrt, rsqrt, sigmoid, tanh, softplus,  // unary
};

struct OpInfo {
  std::string_view op;
  Code code;
  int arity;
};

// The op as a program instruction, or nullptr when _FusedElementwise cannot hold it.
const OpInfo* find_op(std::string_view op);

struct Instruction {
  Code code;
  int a;
  int b;  // -1 for unary ops
};

struct Program {
  int num_inputs = 0;
  std::vector<Instruction> code;
  std::vector<std::string> ops;    // op names, per instruction
  std::vector<std::string> names;  // names of the replaced nodes (may be empty)
};

// The node's program, checked: known ops, arities, operands that name an input or an
// earlier instruction. `num_inputs` is the node's input count.
Result<Program> parse_program(const Node& n, int num_inputs);

}  // namespace actorflow::fused_elementwise

AF_PUBLIC_END
