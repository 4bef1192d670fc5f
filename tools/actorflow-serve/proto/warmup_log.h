// TF Serving's warm-up file: a TFRecord file of PredictionLog records, each holding the
// PredictRequest to replay (assets.extra/tf_serving_warmup_requests).
#pragma once
#include <string>
#include <vector>

#include <actorflow/actorflow.h>

#include "model_manager.h"

namespace serve {

// The input tensors of the file's first `max_records` records, each checked against the
// model's input as a gRPC request's is. Errors name the file and the record: a broken
// frame or CRC, a record that is no PredictionLog or not a predict_log, a bad input.
actorflow::Result<std::vector<actorflow::Tensor>> read_warmup_requests(const std::string& path, const LoadedModel& m, int64_t max_records);

}  // namespace serve
