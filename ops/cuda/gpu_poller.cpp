// The one thread that watches CUDA events for every GPU and runs their callbacks. It
// polls (cudaEventQuery) rather than blocking in cudaEventSynchronize: one thread then
// serves any number of outstanding events on any number of devices, in completion order.
#include <chrono>
#include "actorflow/environment.h"
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <thread>

#include "cuda/gpu_runtime.h"

namespace actorflow::gpu {
namespace {

using Clock = std::chrono::steady_clock;

// A hung kernel must not hang its step forever; a real kernel taking longer than this
// is a bug of its own. AF_GPU_WATCH_TIMEOUT_S overrides it.
std::chrono::seconds watch_timeout() {
  static const std::chrono::seconds t = [] {
    const char* v = environment_switch(EnvironmentSwitch::gpu_watch_timeout_s);
    long s = v ? std::strtol(v, nullptr, 10) : 0;
    return std::chrono::seconds(s > 0 ? s : 600);
  }();
  return t;
}

struct Watch {
  GpuDevice* device;
  cudaEvent_t event;
  std::function<void(Status)> fn;
  Clock::time_point deadline;
  Status result;
  bool own_deadline = false;  // the caller's, not watch_timeout()
};

class Poller {
 public:
  static Poller& global() {
    // Never destroyed: callbacks may still be pending when static destructors run.
    static Poller* p = new Poller();
    return *p;
  }

  void add(Watch w) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      pending_.push_back(std::move(w));
    }
    cv_.notify_one();
  }

 private:
  Poller() { std::thread([this] { loop(); }).detach(); }

  void loop() {
    std::deque<Watch> mine, ready;
    int idle_rounds = 0;
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mu_);
        if (mine.empty() && pending_.empty()) cv_.wait_for(lock, std::chrono::milliseconds(100));
        while (!pending_.empty()) {
          mine.push_back(std::move(pending_.front()));
          pending_.pop_front();
        }
      }
      const Clock::time_point now = Clock::now();
      int current = -1;
      for (auto it = mine.begin(); it != mine.end();) {
        if (it->device->index() != current) {
          current = it->device->index();
          (void)cudaSetDevice(current);
        }
        cudaError_t e = cudaEventQuery(it->event);
        if (e == cudaErrorNotReady && now < it->deadline) {
          ++it;
          continue;
        }
        Status s;
        if (e == cudaErrorNotReady) {
          s = deadline_exceeded(it->own_deadline ? "the GPU work did not finish by its deadline on gpu:" + std::to_string(current)
                                                 : "the GPU work did not finish within " +
                                                       std::to_string(watch_timeout().count()) +
                                                       " s (AF_GPU_WATCH_TIMEOUT_S); gpu:" + std::to_string(current) +
                                                       " may be hung");
          it->event = nullptr;  // still pending on the device: never reused
        } else {
          s = cuda_status(e, "GPU work");
        }
        it->result = s;
        ready.push_back(std::move(*it));
        it = mine.erase(it);
      }
      for (Watch& w : ready) {
        if (w.event) w.device->return_event(w.event);
        try {
          w.fn(w.result);
        } catch (...) {
          std::fprintf(stderr, "actorflow: a GPU completion callback threw: %s\n",
                       status_from_current_exception().to_string().c_str());
        }
      }
      const bool progressed = !ready.empty();
      ready.clear();
      if (mine.empty()) {
        idle_rounds = 0;
        continue;
      }
      // Outstanding work: spin briefly (kernels often finish within microseconds), then
      // back off so that a long kernel does not cost a whole core.
      idle_rounds = progressed ? 0 : idle_rounds + 1;
      if (idle_rounds < 64) std::this_thread::yield();
      else std::this_thread::sleep_for(std::chrono::microseconds(idle_rounds < 1024 ? 5 : 50));
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Watch> pending_;
};

}  // namespace

void watch_event(GpuDevice* device, cudaEvent_t event, std::function<void(Status)> fn,
                 std::optional<Clock::time_point> deadline) {
  Poller::global().add(Watch{device, event, std::move(fn), deadline.value_or(Clock::now() + watch_timeout()),
                             Status::OK(), deadline.has_value()});
}

}  // namespace actorflow::gpu
