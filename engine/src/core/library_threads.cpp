#include "actorflow/library_threads.h"

#include "actorflow/environment.h"

#include <pthread.h>
#include <sched.h>

#include <cstring>

namespace actorflow {

void enter_library_thread(const char* name) {
  char cut[16] = {};
  std::strncpy(cut, name, sizeof(cut) - 1);
  (void)pthread_setname_np(pthread_self(), cut);
  batch_policy_on_this_thread();
}

bool batch_policy_on_this_thread() {
  if (const char* e = environment_switch(EnvironmentSwitch::sched_batch); e && std::strcmp(e, "0") == 0) return false;
  // Between SCHED_OTHER and SCHED_BATCH no privilege is needed (sched_setscheduler(2)).
  sched_param p{};
  return sched_getscheduler(0) == SCHED_OTHER && sched_setscheduler(0, SCHED_BATCH, &p) == 0;
}

ScopedBatchPolicy::ScopedBatchPolicy() : switched_(batch_policy_on_this_thread()) {}

ScopedBatchPolicy::~ScopedBatchPolicy() {
  sched_param p{};
  if (switched_) (void)sched_setscheduler(0, SCHED_OTHER, &p);
}

}  // namespace actorflow
