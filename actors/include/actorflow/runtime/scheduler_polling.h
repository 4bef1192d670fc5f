// How idle actor-scheduler threads wait for work. Polling (spinning, then short sleeps)
// answers the next message within microseconds when the process has the cores to itself,
// as a single-process session does. Where several busy processes share the cores (a ps
// and its workers on one machine, a daemon beside its client) the polling threads take
// the cores the steps need: measured on the 2-core VM with 1 ps + 2 workers, polling
// doubled the CPU time per step and halved the examples per second. Such processes wait
// on a condition variable instead, woken when work is enqueued.
#pragma once
#include "actorflow/api.h"
#include "actorflow/status.h"

AF_PUBLIC_BEGIN

namespace actorflow::runtime {

struct SchedulerPolling {
  int spin_polls = 2000;      // polls without sleeping (CAF's aggressive phase)
  int sleep_polls = 200;      // polls with a 20 us sleep between (CAF's moderate phase)
  // Then waits on a condition variable (5 ms timeout).

  static SchedulerPolling standalone() { return {}; }
  static SchedulerPolling shared_cores() { return {100, 0}; }
};

// Sets the polling of the process-wide scheduler; only before it starts (the first
// session or partition), else failed_precondition. AF_CAF_AGGRESSIVE_POLLS and
// AF_CAF_MODERATE_POLLS in the environment override either setting.
Status set_scheduler_polling(SchedulerPolling p);

}  // namespace actorflow::runtime

AF_PUBLIC_END
