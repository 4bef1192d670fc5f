// The common predict body, {"instances": [row, ...]} with rows of plain numbers for a
// float input, read by simdjson's On-Demand parser where it was found at configure time
// (libsimdjson-dev); without it this reader takes nothing.
//
// Why: nlohmann's DOM for a 784-value row (a node per number, each through strtod, then
// freed) took ~150 us, more than twice the model's one-row step; its SAX parser ~70 us;
// simdjson a few. Anything this reader does not take (named inputs, the columnar form,
// other dtypes, a wrong shape or value, broken JSON, bodies over kFastReaderMaxBytes)
// makes it give up; the caller then reads the body with predict_reader.h's SAX reader,
// which also words the error.
#pragma once
#include <optional>
#include <string_view>

#include <actorflow/actorflow.h>

#include "tensor_json.h"

namespace serve {

// The largest body this reader is asked about: it keeps a padded copy of the body and
// simdjson's index of it (up to 4 bytes per byte) per thread, grown to the largest body
// seen and never given back.
inline constexpr size_t kFastReaderMaxBytes = 1 << 20;

// The input tensor [rows, ...] when the body is that common form and fits the spec;
// nullopt otherwise (never an error of its own).
std::optional<actorflow::Tensor> read_float_instances(std::string_view body, const TensorSpec& input);

}  // namespace serve
