// Gloo's TCP device, with its event-loop thread kept from preempting the threads that
// call into Gloo.
//
// Why: a Gloo pair's mutex is held by the calling thread while it writes a segment in
// place (the "fast path" of Pair::send), and the device's loop thread, on finding that
// mutex taken, returns to epoll_wait at once to try again: the socket is still readable,
// so it spins. When the loop thread is woken by the bytes arriving (the other member's
// half of the exchange), the kernel's wake-up preemption may take the core from the
// writer, mutex held; the loop then spins on that core until the next scheduler tick
// (4 ms at HZ=250). Measured with two members on 2 cores, a 940 KB all-reduce: a median
// of 0.53 ms but a quarter of them at 4-8 ms (mean 1.76 ms); with both members on one
// core, every one at 4 ms. A loop thread under SCHED_BATCH is not allowed to preempt on
// wake-up (it runs when the core's current thread blocks, yields or uses its slice), so
// the writer finishes and lets the mutex go first: the same exchange took a mean of
// 0.41 ms (one core: 0.37 ms), with no 4 ms tail.
#pragma once
#include <memory>
#include <string>

namespace gloo::transport {
class Device;
}

namespace actorflow::net {

// gloo::transport::tcp::CreateDevice on `host`, its loop thread under SCHED_BATCH: it
// inherits the creating thread's policy, switched for the call by ScopedBatchPolicy
// (actorflow/library_threads.h, whose rules and switch apply). Throws what CreateDevice
// throws.
std::shared_ptr<gloo::transport::Device> make_gloo_device(const std::string& host);

}  // namespace actorflow::net
