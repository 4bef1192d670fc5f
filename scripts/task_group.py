"""How scripts/local_cluster, scripts/chaos and scripts/scale start a task: in a process
group of its own, so that signalling the group (stop, continue, kill) reaches whatever the
task started, but in the launcher's session.

A session of its own (`start_new_session`) would also give a group, but with the kernel's
autogroup scheduling (/proc/sys/kernel/sched_autogroup_enabled) every session is a
scheduling group of its own, sharing the CPU equally with the others whatever its threads:
on 2 cores, 4 all-reduce workers that wait on each other every step ran a third slower,
each leading a session, than the same workers in one.
"""

import sys

# Popen keyword arguments. Before Python 3.11 Popen has no process_group: a session then.
OWN_GROUP = {"process_group": 0} if sys.version_info >= (3, 11) else {"start_new_session": True}
