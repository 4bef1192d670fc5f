// Kernels run with denormal results flushed to zero, as TensorFlow's CPU kernels do: a
// result too small for a normal float (below ~1.2e-38 in float32) becomes 0. Arithmetic
// that makes denormals takes a microcode path tens of times slower, and training makes
// them: Adam's first moment decays by beta1 each step in which a weight's gradient is 0
// (a pixel that is always blank), reaches the denormal range after ~800 steps, and the
// model's update then took most of an MLP's step (32,000 against 57,000 examples/s).
//
// On x86 only results are flushed (MXCSR's FTZ); a denormal input (a feed, a checkpoint's
// value) keeps its value, unlike TensorFlow, which also sets DAZ. On AArch64 the one mode
// (FPCR.FZ) flushes both. The library sets the mode around every kernel it runs and on
// the threads it starts; the calling thread's own mode is restored when a kernel
// returns. Elsewhere the guard does nothing.
#pragma once

#include "actorflow/api.h"

AF_PUBLIC_BEGIN
namespace actorflow {

// Flushes denormals on this thread for the guard's lifetime, then restores the mode the
// thread had. Cheap when the mode is already set (one read of the control register).
class ScopedFlushDenormal {
 public:
  ScopedFlushDenormal();
  ~ScopedFlushDenormal();
  ScopedFlushDenormal(const ScopedFlushDenormal&) = delete;
  ScopedFlushDenormal& operator=(const ScopedFlushDenormal&) = delete;

 private:
  unsigned long long saved_ = 0;
  bool changed_ = false;
};

// Flushes denormals on this thread from now on: for threads that only run kernels.
void flush_denormals_on_this_thread();

// Whether this thread flushes denormal results now.
bool denormals_flushed_on_this_thread();

}  // namespace actorflow
AF_PUBLIC_END
