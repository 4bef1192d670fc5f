#include "tensor_json.h"

#include <cstdio>
#include <cstring>
#include <limits>
#include <vector>

#include "instances_reader.h"

namespace serve {

namespace af = actorflow;
using json = nlohmann::json;

namespace {

// The body's values for one input, appended in row-major order as the spec's dtype.
class Filler {
 public:
  Filler(const TensorSpec& spec, std::vector<int64_t> row_dims) : spec_(spec), dims_(std::move(row_dims)) {}

  // `v` is one row (or, columnar, the whole batch with dims_ led by its row count).
  // `where` names v for messages; it is extended in place per element and restored.
  af::Status fill(const json& v, size_t level, std::string& where) {
    if (level == dims_.size()) return push(v, where);
    if (!v.is_array())
      return shape_error(where + " is " + kind(v) + " where a list of " + dim_text(level) + " values belongs");
    auto n = static_cast<int64_t>(v.size());
    if (dims_[level] < 0) dims_[level] = n;  // an unknown dim takes the first row's size
    if (n != dims_[level])
      return shape_error(where + " has " + std::to_string(n) + " values at dimension " + std::to_string(level + offset_) +
                         ", not " + std::to_string(dims_[level]));
    size_t at = where.size();
    char index[24];
    for (int64_t i = 0; i < n; ++i) {
      where.resize(at);
      where += '[';
      where.append(index, static_cast<size_t>(std::snprintf(index, sizeof index, "%lld", static_cast<long long>(i))));
      where += ']';
      AF_RETURN_IF_ERROR(fill(v[static_cast<size_t>(i)], level + 1, where));
    }
    where.resize(at);
    return af::Status::OK();
  }

  void set_dim_offset(size_t o) { offset_ = o; }
  const std::vector<int64_t>& dims() const { return dims_; }
  std::vector<char>& bytes() { return bytes_; }

  std::string expectation() const {
    return "input '" + spec_.name + "' expects " + af::dtype_name(spec_.dtype) + " of shape " + shape_text();
  }

 private:
  std::string shape_text() const {
    if (!spec_.shape.has_rank()) return "<unknown>";
    std::string s = "[";
    for (int i = 0; i < spec_.shape.rank(); ++i) s += (i ? "," : "") + std::to_string(spec_.shape.dim(i));
    return s + "]";
  }
  std::string dim_text(size_t level) const { return dims_[level] < 0 ? "any number of" : std::to_string(dims_[level]); }
  static std::string kind(const json& v) {
    if (v.is_array()) return "a list";
    if (v.is_object()) return "an object";
    if (v.is_string()) return "a string";
    if (v.is_boolean()) return "a boolean";
    if (v.is_null()) return "null";
    return "a number";
  }
  af::Status shape_error(const std::string& what) const { return af::invalid_argument(expectation() + ": " + what); }
  af::Status dtype_error(const std::string& where, const json& v) const {
    return af::invalid_argument(expectation() + ": " + where + " is " + kind(v) + ", not a " + af::dtype_name(spec_.dtype) +
                                " value");
  }
  template <typename T>
  void append(T x) {
    size_t at = bytes_.size();
    bytes_.resize(at + sizeof(T));
    std::memcpy(bytes_.data() + at, &x, sizeof(T));
  }
  af::Status push(const json& v, const std::string& where) {
    switch (spec_.dtype) {
      case af::DType::f32:
        if (!v.is_number()) return dtype_error(where, v);
        append(static_cast<float>(v.get<double>()));
        return af::Status::OK();
      case af::DType::f64:
        if (!v.is_number()) return dtype_error(where, v);
        append(v.get<double>());
        return af::Status::OK();
      case af::DType::i32:
      case af::DType::i64:
      case af::DType::u8: {
        if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX)))
          return dtype_error(where, v);
        int64_t x = v.get<int64_t>();
        if (spec_.dtype == af::DType::i64) {
          append(x);
        } else if (spec_.dtype == af::DType::i32) {
          if (x < INT32_MIN || x > INT32_MAX) return af::invalid_argument(expectation() + ": " + where + " is out of int32's range");
          append(static_cast<int32_t>(x));
        } else {
          if (x < 0 || x > 255) return af::invalid_argument(expectation() + ": " + where + " is out of uint8's range");
          append(static_cast<uint8_t>(x));
        }
        return af::Status::OK();
      }
      case af::DType::boolean:
        if (!v.is_boolean()) return dtype_error(where, v);
        append(static_cast<uint8_t>(v.get<bool>()));
        return af::Status::OK();
      default:
        return af::invalid_argument(expectation() + ": this server does not take " + af::dtype_name(spec_.dtype) + " inputs");
    }
  }

  const TensorSpec& spec_;
  std::vector<int64_t> dims_;
  std::vector<char> bytes_;
  size_t offset_ = 1;
};

// An input's value, given bare or as {"<input name>": value}.
af::Result<const json*> named_value(const json& v, const TensorSpec& spec, const std::string& where) {
  if (!v.is_object()) return &v;
  auto it = v.find(spec.name);
  if (it == v.end()) return af::invalid_argument(where + " lacks input '" + spec.name + "'");
  for (auto& [key, _] : v.items())
    if (key != spec.name) return af::invalid_argument(where + " names '" + key + "', not an input of the model (its input is '" + spec.name + "')");
  return &*it;
}

af::Tensor make_tensor(const TensorSpec& spec, std::vector<int64_t> dims, const std::vector<char>& bytes) {
  af::Tensor t(spec.dtype, af::Shape(std::move(dims)));
  if (!bytes.empty()) std::memcpy(t.raw_data(), bytes.data(), bytes.size());
  return t;
}

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
  if (auto fast = read_float_instances(body, input)) return PredictInput{std::move(*fast), false};
  json doc;
  try {
    doc = json::parse(body);
  } catch (const json::exception& e) {
    return af::invalid_argument(std::string("malformed JSON: ") + e.what());
  }
  if (!doc.is_object()) return af::invalid_argument("the request must be a JSON object with \"instances\" or \"inputs\"");
  if (auto sig = doc.find("signature_name"); sig != doc.end() && !(sig->is_string() && (*sig == "serving_default" || *sig == "")))
    return af::invalid_argument("unknown signature_name " + sig->dump() + ": the model has 'serving_default'");
  bool rows = doc.contains("instances"), cols = doc.contains("inputs");
  if (rows == cols) return af::invalid_argument("the request must have exactly one of \"instances\" and \"inputs\"");
  if (!input.shape.has_rank() || input.shape.rank() < 1)
    return af::invalid_argument("input '" + input.name + "' has no batch dimension to fill");
  std::vector<int64_t> row_dims(input.shape.dims().begin() + 1, input.shape.dims().end());
  PredictInput out;
  out.columnar = cols;
  if (rows) {
    const json& inst = doc["instances"];
    if (!inst.is_array() || inst.empty()) return af::invalid_argument("\"instances\" must be a non-empty list");
    Filler f(input, row_dims);
    for (size_t i = 0; i < inst.size(); ++i) {
      std::string where = "instances[" + std::to_string(i) + "]";
      AF_ASSIGN_OR_RETURN(const json* v, named_value(inst[i], input, where));
      AF_RETURN_IF_ERROR(f.fill(*v, 0, where));
    }
    std::vector<int64_t> dims{static_cast<int64_t>(inst.size())};
    dims.insert(dims.end(), f.dims().begin(), f.dims().end());
    out.tensor = make_tensor(input, dims, f.bytes());
    return out;
  }
  AF_ASSIGN_OR_RETURN(const json* v, named_value(doc["inputs"], input, "\"inputs\""));
  if (!v->is_array() || v->empty()) return af::invalid_argument("\"inputs\" must hold a non-empty list of rows for '" + input.name + "'");
  std::vector<int64_t> dims{static_cast<int64_t>(v->size())};
  dims.insert(dims.end(), row_dims.begin(), row_dims.end());
  Filler f(input, dims);
  f.set_dim_offset(0);
  std::string where = "inputs";
  AF_RETURN_IF_ERROR(f.fill(*v, 0, where));
  out.tensor = make_tensor(input, f.dims(), f.bytes());
  return out;
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
