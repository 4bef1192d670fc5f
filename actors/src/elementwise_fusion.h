// Plan-time fusion of elementwise chains into _FusedElementwise nodes (Grappler's and
// XLA's loop fusion); one of the passes optimize_plan runs (graph_passes.h).
#pragma once
#include "graph_passes.h"

namespace actorflow::runtime {

// Rewrites every maximal group of f32 elementwise nodes of one shape whose inner
// results only the group reads into one _FusedElementwise node; counts them in the
// plan's PassStats.
void fuse_elementwise(OptimizedPlan& p);

// False when AF_FUSE_ELEMENTWISE=0: the pass off for the whole process, for A/B runs of
// programs that do not expose SessionOptions.
bool elementwise_fusion_allowed_by_env();

}  // namespace actorflow::runtime
