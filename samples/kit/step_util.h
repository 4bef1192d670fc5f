// Small pieces both distributed training loops (parameter servers, all-reduce) use.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include <actorflow/actorflow.h>

namespace kit {

// Rows `order[b..e)` of t, as one tensor.
actorflow::Tensor gather_rows(const actorflow::Tensor& t, const std::vector<int64_t>& order, size_t b, size_t e);

// What a lost or restarted task looks like from a step: waiting (and restoring) cures it.
bool retryable(const actorflow::Status& s);

// The trainable variables' bytes.
int64_t model_bytes(const actorflow::Graph& g);

}  // namespace kit
