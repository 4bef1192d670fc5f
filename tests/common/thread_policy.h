// How many of a process's threads run under a scheduling policy (SCHED_BATCH, ...), read
// from /proc/PID/task: for the tests of the threads our code puts under one.
#pragma once
#include <doctest/doctest.h>

#include <dirent.h>
#include <sched.h>
#include <sys/types.h>

#include <cstdlib>
#include <string>

namespace aft {

inline int threads_under_policy(pid_t pid, int policy) {
  const std::string dir = "/proc/" + std::to_string(pid) + "/task";
  DIR* d = opendir(dir.c_str());
  REQUIRE_MESSAGE(d != nullptr, dir);
  int n = 0;
  while (dirent* e = readdir(d))
    if (e->d_name[0] != '.' && sched_getscheduler(std::atoi(e->d_name)) == policy) ++n;
  closedir(d);
  return n;
}

}  // namespace aft
