// ActorFlow's public API in one include: tensors, graph building (the DSL, autodiff,
// layers, losses, metrics, optimizers), sessions, checkpoints, summaries, the data
// readers and input pipelines, what CUDA this build offers, servable model export, and
// the network layer's cluster specs, node daemon and cluster training loops.
//
// The data headers live with the runtime (actors/include), the CUDA query with the ops
// (ops/include) and the cluster headers with the network layer (net/include); all are
// one include directory in an installed tree.
#pragma once
#include "actorflow/data/dataset.h"
#include "actorflow/data/readers.h"
#include "actorflow/collective.h"
#include "actorflow/device.h"
#include "actorflow/distributed.h"
#include "actorflow/dsl.h"
#include "actorflow/dsl_data_flow.h"
#include "actorflow/net/cluster_sources.h"
#include "actorflow/net/cluster_spec.h"
#include "actorflow/net/collective.h"
#include "actorflow/net/daemon.h"
#include "actorflow/net/steady_rate.h"
#include "actorflow/net/training_loop.h"
#include "actorflow/net/training_task.h"
#include "actorflow/ops/cuda_info.h"
#include "actorflow/partitioned_variables.h"
#include "actorflow/saved_model.h"
#include "actorflow/saver.h"
#include "actorflow/session.h"
#include "actorflow/summary.h"
