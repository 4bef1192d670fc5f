#include "actorflow/environment.h"

#include <cstdlib>

namespace actorflow {

const char* environment_switch_name(EnvironmentSwitch s) {
  switch (s) {
    case EnvironmentSwitch::num_threads: return "AF_NUM_THREADS";
    case EnvironmentSwitch::matmul_backend: return "AF_MATMUL_BACKEND";
    case EnvironmentSwitch::conv_backend: return "AF_CONV_BACKEND";
    case EnvironmentSwitch::fuse_elementwise: return "AF_FUSE_ELEMENTWISE";
    case EnvironmentSwitch::fuse_matmul_bias_relu: return "AF_FUSE_MATMUL_BIAS_RELU";
    case EnvironmentSwitch::fuse_conv_bias_relu: return "AF_FUSE_CONV_BIAS_RELU";
    case EnvironmentSwitch::caf_aggressive_polls: return "AF_CAF_AGGRESSIVE_POLLS";
    case EnvironmentSwitch::caf_moderate_polls: return "AF_CAF_MODERATE_POLLS";
    case EnvironmentSwitch::net_spin_us: return "AF_NET_SPIN_US";
    case EnvironmentSwitch::dial_own_daemon: return "AF_DIAL_OWN_DAEMON";
    case EnvironmentSwitch::sched_batch: return "AF_SCHED_BATCH";
    case EnvironmentSwitch::gpu_module: return "AF_GPU_MODULE";
    case EnvironmentSwitch::gpu_allow_tf32: return "AF_GPU_ALLOW_TF32";
    case EnvironmentSwitch::gpu_watch_timeout_s: return "AF_GPU_WATCH_TIMEOUT_S";
    case EnvironmentSwitch::log_device_placement: return "AF_LOG_DEVICE_PLACEMENT";
    case EnvironmentSwitch::caller_runs_cheap_steps: return "AF_CALLER_RUNS_CHEAP_STEPS";
    case EnvironmentSwitch::caller_runs_serial_steps: return "AF_CALLER_RUNS_SERIAL_STEPS";
    case EnvironmentSwitch::caller_runs_training_steps: return "AF_CALLER_RUNS_TRAINING_STEPS";
    case EnvironmentSwitch::colocate_cheap_ops: return "AF_COLOCATE_CHEAP_OPS";
  }
  return "";
}

const char* environment_switch(EnvironmentSwitch s) { return std::getenv(environment_switch_name(s)); }

}  // namespace actorflow
