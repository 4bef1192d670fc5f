// The compute_type attribute of a CPU kernel's node (set by ComputeTypeScope, graph.h).
#pragma once
#include <string>

#include "actorflow/graph.h"

namespace actorflow::cpu {

// True when the node asks for bfloat16 operands. Absent or "float32" is float32; any
// other value leaves a message in *error, which the kernel reports when it runs.
inline bool bf16_compute(const Node& n, std::string* error) {
  const AttrValue* t = n.find_attr("compute_type");
  if (!t) return false;
  const std::string type = t->is<std::string>() ? t->get<std::string>() : t->to_string();
  if (type == "bfloat16") return true;
  if (type != "float32") *error = "compute_type must be \"float32\" or \"bfloat16\", got " + type;
  return false;
}

}  // namespace actorflow::cpu
