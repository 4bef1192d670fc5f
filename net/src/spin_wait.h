// Busy-waiting for a little while before sleeping on a socket.
//
// On our VMs a thread asleep in poll/epoll_wait on the other core takes 30-100 us to run
// again: the sender's softirq has to wake a halted vCPU, and the woken reader then waits
// for the socket lock that the sender still holds (perf of remote_step_latency: most of a
// 70-100 us step was sock_def_readable's wake-up and lock_sock contention, against 11 us
// when both ends happened to share a core). A reader that is still polling when the bytes
// land needs no wake-up at all. So the client polls for the answer of the step it just
// sent, and a daemon's io thread polls for the next frame after each one, both for at most
// a budget, giving the core to any runnable thread between polls (sched_yield). A poller
// whose yields did hand the core over (its involuntary context switches rose) stops and
// sleeps: its core is wanted, and when the two ends share one core, handing it to each
// other by sleeping is the faster way. (A pause of all polling after such a find made it
// worse: the ends then slept on two cores, 26-34 us a step.) A daemon polls only after it
// answered a step from its io thread; the frames of training steps do not arm it, as
// there polling io threads took 5% of the examples per second of 1 ps + 2 workers on
// 2 cores.
#pragma once
#include <asio.hpp>

#include <chrono>
#include <functional>

namespace actorflow::net {

// AF_NET_SPIN_US when set (0 turns spinning off), else 50 us.
std::chrono::microseconds default_spin_budget();

class SpinWait {
 public:
  explicit SpinWait(std::chrono::microseconds budget) : budget_(budget) {}
  // True while the budget lasts (its clock starts at the first call) and the core is not
  // wanted, after yielding it once: poll again. False then on: sleep.
  bool again();

 private:
  std::chrono::microseconds budget_;
  std::chrono::steady_clock::time_point start_{};
  bool started_ = false;
  unsigned polls_ = 0;
  long switches_ = 0;  // this thread's involuntary context switches at the start
};

// io.run(), except that after a handler it keeps polling for ready ones (epoll with a zero
// timeout) for up to `spin` before it blocks, when `armed` says so (it is asked, from this
// thread, once handlers have run; none: always). Returns when io is stopped or out of work.
void run_io_spinning(asio::io_context& io, std::chrono::microseconds spin,
                     const std::function<bool()>& armed = {});

}  // namespace actorflow::net
