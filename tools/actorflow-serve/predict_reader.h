// The general reader of a predict body: every form TF Serving's REST API takes (rows,
// named rows, columnar, named columnar; any dtype this server takes), read in one pass
// of nlohmann-json's SAX parser straight into the input tensor's buffer.
//
// Why not a DOM: nlohmann's DOM costs a node (16 bytes, more with the vectors' slack)
// per number and a vector per list, ~30x a body of short numbers; and code that walks
// a DOM, dumps or copies it recurses once per level of the client's nesting, which a
// 200 KB body of brackets took past the stack. The SAX parser keeps its own stack of
// one bit per level, and this reader refuses bodies nested deeper than kMaxJsonDepth,
// so neither memory nor recursion follows what the client nests.
//
// Errors come in the order the DOM reader gave them: broken JSON, then the nesting
// limit, then a body that is no object, then signature_name, then "exactly one of
// instances and inputs", then the first fault in the input's values.
#pragma once
#include <string_view>

#include <actorflow/actorflow.h>

#include "tensor_json.h"

namespace serve {

// Deeper JSON is refused (400). A predict body needs the input's rank plus three or
// four; TF Serving's parser stops at a bounded depth too.
inline constexpr int kMaxJsonDepth = 100;

// Every failure is invalid_argument (HTTP 400).
actorflow::Result<PredictInput> read_predict_request(std::string_view body, const TensorSpec& input);

}  // namespace serve
