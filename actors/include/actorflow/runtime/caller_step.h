// Whether a step ran to its end on the thread that started it, with only cheap kernels
// (an all-cheap plan, see run_path.h's caller_runs_cheap_steps): such a step never waits
// for another thread and takes microseconds. A node daemon uses it to run those steps on
// its io thread (net/src/daemon.cpp): it clears the flag, runs a step, then reads it.
#pragma once

namespace actorflow::runtime {

// Set (or cleared) by each step an executor starts, for the starting thread.
void note_caller_step(bool ran_here);
// The flag of the last step this thread started since the last call; clears it.
bool take_caller_step();

}  // namespace actorflow::runtime
