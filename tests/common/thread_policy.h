// A process's threads, each with its name and scheduling policy (SCHED_OTHER,
// SCHED_BATCH, ...), read from /proc/PID/task: for the tests of the threads our code
// names and puts under a policy.
#pragma once
#include <doctest/doctest.h>

#include <dirent.h>
#include <sched.h>
#include <sys/types.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

namespace aft {

struct ThreadSeen {
  pid_t tid = 0;
  std::string name;
  int policy = -1;
};

inline std::vector<ThreadSeen> process_threads(pid_t pid) {
  const std::string dir = "/proc/" + std::to_string(pid) + "/task";
  DIR* d = opendir(dir.c_str());
  REQUIRE_MESSAGE(d != nullptr, dir);
  std::vector<ThreadSeen> out;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    ThreadSeen t;
    t.tid = static_cast<pid_t>(std::atoi(e->d_name));
    std::ifstream comm(dir + "/" + e->d_name + "/comm");
    std::getline(comm, t.name);
    t.policy = sched_getscheduler(t.tid);
    // A thread that ended between the listing and the reads is not counted.
    if (comm && t.policy >= 0) out.push_back(t);
  }
  closedir(d);
  return out;
}

// The policy of each of a process's threads named `name` (a thread starts with its
// creator's name, so this also finds the threads another library starts from ours).
inline std::vector<int> policies_of_threads_named(pid_t pid, const std::string& name) {
  std::vector<int> out;
  for (const auto& t : process_threads(pid))
    if (t.name == name) out.push_back(t.policy);
  return out;
}

inline int threads_under_policy(pid_t pid, int policy) {
  int n = 0;
  for (const auto& t : process_threads(pid)) n += t.policy == policy;
  return n;
}

}  // namespace aft
