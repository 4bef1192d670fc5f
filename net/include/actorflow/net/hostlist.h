// Slurm's compressed lists, expanded as `scontrol show hostnames` and Slurm's task
// counts do, so a launcher's environment can be read without calling scontrol.
#pragma once
#include "actorflow/api.h"
#include <string_view>
#include <vector>
#include <string>

#include "actorflow/status.h"

AF_PUBLIC_BEGIN

namespace actorflow::net {

// "node[01-03,7]" → node01 node02 node03 node7; "a[1-2],b5" → a1 a2 b5;
// "r[1-2]-n[1-2]" → r1-n1 r1-n2 r2-n1 r2-n2. A range keeps the zero padding of its
// first number. The error quotes the list and says what is wrong; callers name the
// variable.
Result<std::vector<std::string>> expand_hostlist(std::string_view list);
// SLURM_TASKS_PER_NODE's form: "2(x3),1" → 2 2 2 1.
Result<std::vector<int>> expand_tasks_per_node(std::string_view list);

}  // namespace actorflow::net

AF_PUBLIC_END
