#include "tensor_json.h"

#include "instances_reader.h"
#include "predict_reader.h"

namespace serve {

namespace af = actorflow;
using json = nlohmann::json;

namespace {

json values_json(const af::Tensor& t, int64_t& at, int level) {
  if (level == t.rank()) {
    int64_t i = at++;
    switch (t.dtype()) {
      case af::DType::i32: return json(t.data<int32_t>()[i]);
      case af::DType::i64: return json(t.data<int64_t>()[i]);
      case af::DType::u8: return json(t.data<uint8_t>()[i]);
      case af::DType::boolean: return json(t.element_as_double(i) != 0);
      case af::DType::f32: return json(static_cast<double>(t.data<float>()[i]));
      default: return json(t.element_as_double(i));
    }
  }
  json a = json::array();
  for (int64_t k = 0; k < t.dim(level); ++k) a.push_back(values_json(t, at, level + 1));
  return a;
}

}  // namespace

af::Result<PredictInput> parse_predict_request(std::string_view body, const TensorSpec& input) {
  // The fast reader keeps its buffers per thread: bounded by this, they stay small, and a
  // large body costs the general reader's one pass, a small multiple of itself.
  if (body.size() <= kFastReaderMaxBytes)
    if (auto fast = read_float_instances(body, input)) return PredictInput{std::move(*fast), false};
  return read_predict_request(body, input);
}

std::string predict_response(const af::Tensor& output, bool columnar) {
  int64_t at = 0;
  json doc;
  doc[columnar ? "outputs" : "predictions"] = values_json(output, at, 0);
  return doc.dump();
}

std::string tf_dtype_name(af::DType t) {
  switch (t) {
    case af::DType::f32: return "DT_FLOAT";
    case af::DType::f64: return "DT_DOUBLE";
    case af::DType::i32: return "DT_INT32";
    case af::DType::i64: return "DT_INT64";
    case af::DType::u8: return "DT_UINT8";
    case af::DType::boolean: return "DT_BOOL";
    case af::DType::string: return "DT_STRING";
    default: return "DT_INVALID";
  }
}

json tensor_info_json(const TensorSpec& spec) {
  json shape;
  shape["unknown_rank"] = !spec.shape.has_rank();
  shape["dim"] = json::array();
  for (int i = 0; spec.shape.has_rank() && i < spec.shape.rank(); ++i)
    shape["dim"].push_back({{"size", std::to_string(spec.shape.dim(i))}, {"name", ""}});
  return {{"dtype", tf_dtype_name(spec.dtype)}, {"tensor_shape", shape}, {"name", spec.name + ":0"}};
}

}  // namespace serve
