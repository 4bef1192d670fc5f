// TF Serving's REST bodies <-> tensors: the row ("instances") and columnar ("inputs")
// forms of a predict request, checked against the model's input spec (read by
// instances_reader.h's fast reader where it can, else by predict_reader.h's), and the
// "predictions" / "outputs" of the answer (through nlohmann-json).
#pragma once
#include <string>
#include <string_view>

#include <actorflow/actorflow.h>

#include <nlohmann/json.hpp>

namespace serve {

struct TensorSpec {
  std::string name;
  actorflow::DType dtype = actorflow::DType::f32;
  actorflow::Shape shape;  // dim 0 is the batch
};

struct PredictInput {
  actorflow::Tensor tensor;  // [rows, ...] as the spec says
  bool columnar = false;     // answer with "outputs" rather than "predictions"
};

// Parses a predict body. Every failure is invalid_argument (HTTP 400); a wrong shape or
// dtype names the input, its expected dtype and shape, and where the body differs.
actorflow::Result<PredictInput> parse_predict_request(std::string_view body, const TensorSpec& input);

// {"predictions": rows} or {"outputs": tensor}.
std::string predict_response(const actorflow::Tensor& output, bool columnar);

// TF's names for dtypes ("DT_FLOAT") and a signature entry as GetModelMetadata gives it.
std::string tf_dtype_name(actorflow::DType t);
nlohmann::json tensor_info_json(const TensorSpec& spec);

}  // namespace serve
