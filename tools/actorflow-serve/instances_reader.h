// The common predict body, {"instances": [row, ...]} with rows of plain numbers for a
// float input, read in one pass straight into the values of the input tensor.
//
// Why: nlohmann's DOM for a 784-value row (a node per number, each through strtod, then
// freed) took ~150 us, more than twice the model's one-row step; its SAX parser ~70 us;
// simdjson's On-Demand parser ~12 us, a fifth of the server's CPU per request under
// load. This form has four kinds of token, so a scanner of its own reads it in one pass
// with no index and no copy of the body, numbers through Clinger's exact fast path
// (about half simdjson's time for that body). Anything it does not take (named inputs,
// the columnar form, other dtypes, keys with escapes, a wrong shape or value, broken
// JSON, bodies over kFastReaderMaxBytes) makes it give up; the caller then reads the body
// with predict_reader.h's SAX reader, which also words the error.
#pragma once
#include <optional>
#include <string_view>

#include <actorflow/actorflow.h>

#include "tensor_json.h"

namespace serve {

// The largest body this reader is asked about. It keeps the values it read per thread for
// the next body, up to 1 MiB of them.
inline constexpr size_t kFastReaderMaxBytes = 1 << 20;

// The input tensor [rows, ...] when the body is that common form and fits the spec;
// nullopt otherwise (never an error of its own).
std::optional<actorflow::Tensor> read_float_instances(std::string_view body, const TensorSpec& input);

}  // namespace serve
