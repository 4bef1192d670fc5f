// --device cpu|gpu: where a sample's model runs. --device gpu builds the whole model
// (and its training ops) under DeviceScope "/gpu:0": ops with a GPU kernel run there,
// the rest fall back to the CPU with one log line each (TF's soft placement). With no
// GPU the sample stops with an error saying so, rather than silently training on the CPU
// (a TF user who asks for a GPU by flag wants to know it is not there). In a cluster it
// needs --strategy allreduce: each worker trains its replica on its /gpu:0 and the
// gradients are all-reduced there with NCCL.
#pragma once
#include <actorflow/actorflow.h>

#include <memory>
#include <string>

#include "flags.h"

namespace kit {

// Empty when --device can be honoured; otherwise the message (no GPU found, and why).
std::string device_error(const Flags& f, bool distributed);

// The scope that places the model while training, or null for --device cpu (and for
// --mode export/inference, whose graphs stay device-free). Exits with code 2 and the
// message of device_error when --device gpu cannot be honoured.
std::unique_ptr<actorflow::DeviceScope> device_scope(actorflow::Graph& g, const Flags& f, bool distributed);

}  // namespace kit
