// Where the nodes of one executor run: each in its own
// actor, in a producer's actor (colocated), or all on the caller's thread. Decided once,
// when the executor is built, from the plan's per-step edges.
#pragma once
#include <functional>
#include <vector>

#include "node_actor.h"

namespace actorflow::runtime {

// producers[i][slot]: the node index feeding node i's slot per step (-1: fed or bound).

// Kahn's order over those edges: the order a step runs in on one thread, and in which
// colocated nodes run after their head.
Result<std::vector<int>> topological_order(const std::vector<std::vector<int>>& producers);

// Whether the actors could never run two kernels of one step at once, so that the
// caller's thread loses nothing by running the step itself: every node that runs is
// synchronous and stateless (steps may then run concurrently, in any order), and the
// ones that are not cheap lie on one path. An MLP's forward pass is such a plan; two
// independent branches are not. False when every node is cheap (nothing to order).
bool is_serial(const std::vector<NodeRuntime>& nodes, const std::vector<int>& order,
               const std::vector<std::vector<int>>& producers, const std::vector<char>& cheap,
               const std::vector<char>& inert);

// A rough cost of one run of `node`'s kernel, in multiply-adds: a matrix product or a
// convolution counts its multiply-adds, a node that only moves metadata or has no data
// input (a variable read, a constant) almost nothing, anything else 8 per element it
// reads and writes (a memory-bound pass costs about as much as 8 vectorized multiply-adds
// per element on our cores). `inputs`: the static shapes of its data inputs. Unknown
// dims count as 64 (a typical batch): only the ratios between nodes matter.
double estimated_cost(const Node& node, const std::vector<Shape>& inputs);

// Whether a plan of synchronous kernels (stateful ones allowed, e.g. a training step) is
// *mostly serial*: its costliest path (by `cost`, over the per-step edges) carries at
// least `min_fraction` of the whole plan's estimated cost. The actors could then overlap
// at most the rest, less than the caller's thread saves by running every kernel without
// a hop and giving large products the whole pool. False with an async kernel, or when
// the plan costs nothing (an all-cheap plan has its own path).
bool is_mostly_serial(const std::vector<NodeRuntime>& nodes, const std::vector<int>& order,
                      const std::vector<std::vector<int>>& producers, const std::vector<double>& cost,
                      const std::vector<char>& inert, double min_fraction);

// The fraction is_mostly_serial asks for when the executor decides (run_path.h).
constexpr double kMostlySerialFraction = 0.8;

// Places each cheap node whose every per-step input comes from one actor into that
// actor, after its producers: sets head, member_pos and the head's members. Only a
// synchronous head takes members (an async one finishes in a later message); a fed
// input or an encoded edge keeps a node apart, as both arrive as messages. `fed[i]`:
// node i takes a feed.
void colocate_cheap_nodes(std::vector<NodeRuntime>& nodes, const std::vector<int>& order,
                          const std::vector<std::vector<int>>& producers, const std::vector<char>& cheap,
                          const std::vector<char>& fed, const std::function<bool(const Node&, const Node&)>& encoded);

}  // namespace actorflow::runtime
