// Busy-waiting for a little while before sleeping on a socket.
//
// On our VMs a thread asleep in poll/epoll_wait on the other core takes 30-100 us to run
// again: the sender's softirq has to wake a halted vCPU, and the woken reader then waits
// for the socket lock that the sender still holds (perf of remote_step_latency: most of a
// 70-100 us step was sock_def_readable's wake-up and lock_sock contention, against 11 us
// when both ends happened to share a core). A reader that is still polling when the bytes
// land needs no wake-up at all. So the client polls for the answer of the step it just
// sent, and a daemon's io thread polls for the next frame after each one, both for at most
// a budget, giving the core to any runnable thread between polls (sched_yield), so a spin
// never delays work that could run.
#pragma once
#include <asio.hpp>

#include <chrono>

namespace actorflow::net {

// AF_NET_SPIN_US when set (0 turns spinning off), else 50 us.
std::chrono::microseconds default_spin_budget();

class SpinWait {
 public:
  explicit SpinWait(std::chrono::microseconds budget) : budget_(budget) {}
  // True while the budget lasts (its clock starts at the first call), after yielding the
  // core once: poll again. False once it is spent: sleep.
  bool again();

 private:
  std::chrono::microseconds budget_;
  std::chrono::steady_clock::time_point start_{};
  bool started_ = false;
};

// io.run(), except that after each handler it keeps polling for ready ones (epoll with a
// zero timeout) for up to `spin` before it blocks. Returns when io is stopped or out of work.
void run_io_spinning(asio::io_context& io, std::chrono::microseconds spin);

}  // namespace actorflow::net
