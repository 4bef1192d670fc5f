// A thread's "the last step ran here" flag (caller_step.h).
#include "actorflow/runtime/caller_step.h"

namespace actorflow::runtime {
namespace {
thread_local bool t_ran_here = false;
}  // namespace

void note_caller_step(bool ran_here) { t_ran_here = ran_here; }

bool take_caller_step() {
  bool r = t_ran_here;
  t_ran_here = false;
  return r;
}

}  // namespace actorflow::runtime
