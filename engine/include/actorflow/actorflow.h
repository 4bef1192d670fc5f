// ActorFlow's public API in one include: tensors, graph building (the DSL, autodiff,
// layers, losses, metrics, optimizers), sessions, checkpoints, summaries, the data
// readers and input pipelines, and what CUDA this build offers.
//
// The data headers live with the runtime (actors/include) and the CUDA query with the
// ops (ops/include); all three folders are one include directory in an installed tree.
#pragma once
#include "actorflow/data/dataset.h"
#include "actorflow/data/readers.h"
#include "actorflow/device.h"
#include "actorflow/dsl.h"
#include "actorflow/ops/cuda_info.h"
#include "actorflow/saver.h"
#include "actorflow/session.h"
#include "actorflow/summary.h"
