// Warm-up: a version runs predicts before it is made available, so that its first
// client request is as fast as its later ones (the first steps of a session prepare its
// graph, allocate and touch its buffers). As TF Serving does, the requests are those of
// the version's assets.extra/tf_serving_warmup_requests (a TFRecord file of
// PredictionLog records holding PredictRequests) when it has one; otherwise
// --warmup_requests predicts of zeros in the shapes requests will have: one row, and
// with batching a full batch. A warm-up predict that fails fails the load.
#pragma once
#include <cstdint>
#include <functional>
#include <string>

#include <actorflow/actorflow.h>

#include "batcher.h"
#include "model_manager.h"

namespace serve {

struct WarmupOptions {
  int64_t requests = 10;  // of each shape, when the version has no warm-up file; 0: none
};

// TF Serving's name for the file, under a version's folder.
inline constexpr const char* kWarmupFile = "assets.extra/tf_serving_warmup_requests";
// TF Serving reads at most this many records of it.
inline constexpr int64_t kMaxWarmupRecords = 1000;

actorflow::Status warm_up(const LoadedModel& m, const WarmupOptions& options, const BatchOptions& batching,
                          const std::function<void(const std::string&)>& log);

}  // namespace serve
