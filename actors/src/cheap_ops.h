// Which nodes cost less to run where their step already is than a message hop to an
// actor of their own (~1-2 us on a CAF worker): TF's "inexpensive" kernels.
#pragma once
#include "actorflow/kernel.h"

namespace actorflow::runtime {

// Outputs larger than this are not cheap even for an elementwise op: a 4096-element
// pass is ~1 us, the cost of the hop it saves.
constexpr int64_t kCheapElements = 4096;

// True for a synchronous, stateless kernel that either only moves metadata (Identity,
// Shape, ...) or works in proportion to its output (elementwise ops, copies such as
// Slice and Concat, softmax) with every output shape known and small. Stateful ops
// (variables, random streams) keep their actors: their order across steps is the
// actors' job.
bool is_cheap(const Node& node, OpKernel& kernel);

// True for ops that only forward or describe their input (Identity, Shape, NoOp, ...):
// O(1) whatever the tensor.
bool is_metadata_op(const std::string& op);

// True for a synchronous, stateless kernel of any cost: one that may run on a caller's
// thread, concurrently with itself, in no particular order across steps.
bool is_stateless_sync(const Node& node, OpKernel& kernel);

}  // namespace actorflow::runtime
