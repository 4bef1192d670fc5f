// The process-wide switches ActorFlow reads from the environment, all named here and read
// through environment_switch() only. Each is read when its part needs it (a device when it
// starts, a plan when it is built), so a program or test that sets one before that point
// gets it. Per-session settings are SessionOptions, per-daemon ones DaemonOptions; these
// are the few that are the process's, or that compare two implementations of one thing.
#pragma once
#include "actorflow/api.h"

AF_PUBLIC_BEGIN

namespace actorflow {

enum class EnvironmentSwitch {
  num_threads,            // AF_NUM_THREADS: the CPU device's threads (unset: the cores)
  matmul_backend,         // AF_MATMUL_BACKEND=eigen|onednn: force MatMul's backend
  conv_backend,           // AF_CONV_BACKEND=eigen|onednn: force Conv2D's backend
  fuse_elementwise,       // AF_FUSE_ELEMENTWISE=0: no elementwise fusion pass
  fuse_matmul_bias_relu,  // AF_FUSE_MATMUL_BIAS_RELU=0: no MatMul+BiasAdd+Relu fusion
  fuse_conv_bias_relu,    // AF_FUSE_CONV_BIAS_RELU=0: no Conv2D+BiasAdd+Relu fusion (nor _FusedMaxPoolGrad)
  caf_aggressive_polls,   // AF_CAF_AGGRESSIVE_POLLS=N: CAF scheduler's spinning polls
  caf_moderate_polls,     // AF_CAF_MODERATE_POLLS=N: and its polls between short sleeps
  net_spin_us,            // AF_NET_SPIN_US=N: how long a caller polls its socket before sleeping
  dial_own_daemon,        // AF_DIAL_OWN_DAEMON=1: reach this process's daemon over TCP too
  sched_batch,            // AF_SCHED_BATCH=0: the library's threads keep the default policy
  gpu_module,             // AF_GPU_MODULE=off|PATH: no GPU, or the CUDA module to load
  gpu_allow_tf32,         // AF_GPU_ALLOW_TF32=1: f32 products may use TF32 tensor cores
  gpu_watch_timeout_s,    // AF_GPU_WATCH_TIMEOUT_S=N: a GPU op still running after N s is reported
  log_device_placement,   // AF_LOG_DEVICE_PLACEMENT=1: each new plan of a GPU graph logs where its nodes run
  // The run path's defaults (actorflow/runtime/run_path.h), 0 or 1:
  caller_runs_cheap_steps,     // AF_CALLER_RUNS_CHEAP_STEPS
  caller_runs_serial_steps,    // AF_CALLER_RUNS_SERIAL_STEPS
  caller_runs_training_steps,  // AF_CALLER_RUNS_TRAINING_STEPS
  colocate_cheap_ops,          // AF_COLOCATE_CHEAP_OPS
};

// The variable's name, "AF_NUM_THREADS" for num_threads.
const char* environment_switch_name(EnvironmentSwitch s);

// The switch's value now, or nullptr when it is not set.
const char* environment_switch(EnvironmentSwitch s);

}  // namespace actorflow

AF_PUBLIC_END
