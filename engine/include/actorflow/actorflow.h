// ActorFlow's public API in one include: tensors, graphs, the DSL and sessions.
#pragma once
#include "actorflow/device.h"
#include "actorflow/dsl_array.h"
#include "actorflow/dsl_core.h"
#include "actorflow/dsl_math.h"
#include "actorflow/gradients.h"
#include "actorflow/graph.h"
#include "actorflow/session.h"
#include "actorflow/shape.h"
#include "actorflow/status.h"
#include "actorflow/tensor.h"
