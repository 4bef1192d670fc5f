// Where the nodes of one executor run (issue 13, sections 3 and 4): each in its own
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

// Places each cheap node whose every per-step input comes from one actor into that
// actor, after its producers: sets head, member_pos and the head's members. Only a
// synchronous head takes members (an async one finishes in a later message); a fed
// input or an encoded edge keeps a node apart, as both arrive as messages. `fed[i]`:
// node i takes a feed.
void colocate_cheap_nodes(std::vector<NodeRuntime>& nodes, const std::vector<int>& order,
                          const std::vector<std::vector<int>>& producers, const std::vector<char>& cheap,
                          const std::vector<char>& fed, const std::function<bool(const Node&, const Node&)>& encoded);

}  // namespace actorflow::runtime
