// Graph building in one include: the DSL's ops, autodiff, layers, losses, metrics and
// optimizers. Code below the runtime (the op gradient functions in ops/grads) includes
// this rather than <actorflow/actorflow.h>, which also reaches up into sessions' data
// pipelines.
#pragma once
#include "actorflow/dsl_array.h"
#include "actorflow/dsl_core.h"
#include "actorflow/dsl_math.h"
#include "actorflow/dsl_nn.h"
#include "actorflow/gradients.h"
#include "actorflow/graph.h"
#include "actorflow/layers.h"
#include "actorflow/losses.h"
#include "actorflow/metrics.h"
#include "actorflow/optimizers.h"
#include "actorflow/shape.h"
#include "actorflow/status.h"
#include "actorflow/tensor.h"
