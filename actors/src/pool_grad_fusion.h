// Plan-time fusion of a pooled Relu's gradient into the max-pool gradient; one of the
// passes optimize_plan runs (graph_passes.h).
#pragma once
#include "graph_passes.h"

namespace actorflow::runtime {

// Relu's gradient is where(r > 0, g, 0) with r the Relu's output (fuse_bias_relu moves
// the test there), and when r is then max-pooled, g is MaxPoolGrad(r, pool, dpool): zero
// except at each window's first maximum. Every
//
//   Select(Greater(r, 0), MaxPoolGrad(r, pool, dpool), 0)
//
// whose Greater and MaxPoolGrad only that Select reads (neither fetched, fed, a target,
// nor waited for by a control edge) becomes one _FusedMaxPoolGrad(r, pool, dpool): the
// test made only at the maxima, two passes over r's size and the boolean mask gone, the
// same bits (NaN and signed zeros included). The fused node is a rewrite of the Select
// (same id, name, device and output); it counts in PassStats::fused. The caller runs it
// after fuse_bias_relu and only where the CPU kernels run (no GPU kernel).
void fuse_max_pool_relu_grad(OptimizedPlan& p);

}  // namespace actorflow::runtime
