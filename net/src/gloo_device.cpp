#include "gloo_device.h"

#include "actorflow/environment.h"

#include <gloo/transport/tcp/device.h>
#include <sched.h>

#include <string>

namespace actorflow::net {

namespace {

// This thread under SCHED_BATCH until destroyed, when it runs under SCHED_OTHER now.
class ScopedBatchPolicy {
 public:
  ScopedBatchPolicy() {
    if (const char* e = environment_switch(EnvironmentSwitch::gloo_sched_batch); e && std::string(e) == "0") return;
    sched_param p{};
    switched_ = sched_getscheduler(0) == SCHED_OTHER && sched_setscheduler(0, SCHED_BATCH, &p) == 0;
  }
  ~ScopedBatchPolicy() {
    sched_param p{};
    if (switched_) (void)sched_setscheduler(0, SCHED_OTHER, &p);
  }
  ScopedBatchPolicy(const ScopedBatchPolicy&) = delete;
  ScopedBatchPolicy& operator=(const ScopedBatchPolicy&) = delete;

 private:
  bool switched_ = false;
};

}  // namespace

std::shared_ptr<gloo::transport::Device> make_gloo_device(const std::string& host) {
  gloo::transport::tcp::attr attr;
  attr.hostname = host;
  ScopedBatchPolicy batch;
  return gloo::transport::tcp::CreateDevice(attr);
}

}  // namespace actorflow::net
