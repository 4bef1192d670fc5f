#include "instances_reader.h"

#include <cmath>
#include <cstring>
#include <vector>

#if AF_SERVE_SIMDJSON
#include <simdjson.h>
#endif

namespace serve {

namespace af = actorflow;

namespace {

#if AF_SERVE_SIMDJSON
namespace od = simdjson::ondemand;

// Values of one row (or of a list inside it) at `level` of the row's dims, appended in
// row-major order. False for anything the DOM path should look at.
template <typename T>
bool read_level(od::value v, size_t level, std::vector<int64_t>& dims, std::vector<T>& out) {
  if (level == dims.size()) {
    // As the DOM path: every JSON number through double (json::get<double>).
    // A negative zero: nlohmann reads "-0" as the integer 0; the DOM path settles which.
    double x;
    if (v.get_double().get(x) || (x == 0 && std::signbit(x))) return false;
    out.push_back(static_cast<T>(x));
    return true;
  }
  od::array a;
  if (v.get_array().get(a)) return false;
  int64_t n = 0;
  if (level + 1 == dims.size()) {
    // The innermost list, most of the values: read in place rather than one call each.
    if (dims[level] > 0) out.reserve(out.size() + static_cast<size_t>(dims[level]));
    for (auto element : a) {
      double x;
      if (element.get_double().get(x) || (x == 0 && std::signbit(x))) return false;
      out.push_back(static_cast<T>(x));
      ++n;
    }
  } else {
    for (auto element : a) {
      od::value e;
      if (element.get(e) || !read_level(e, level + 1, dims, out)) return false;
      ++n;
    }
  }
  // An unknown dimension takes the first row's size, as the DOM path does.
  if (dims[level] < 0) dims[level] = n;
  return n == dims[level];
}

template <typename T>
std::optional<af::Tensor> read(std::string_view body, const TensorSpec& input) {
  // simdjson reads up to SIMDJSON_PADDING bytes past the end: the body goes into a
  // padded buffer this thread keeps (a copy of a few KiB, no allocation once grown).
  thread_local od::parser parser;
  thread_local std::string padded;
  padded.assign(body.data(), body.size());
  padded.resize(body.size() + simdjson::SIMDJSON_PADDING, ' ');
  std::vector<int64_t> dims(input.shape.dims().begin() + 1, input.shape.dims().end());
  std::vector<T> values;
  int64_t rows = 0;
  od::document doc;
  od::object obj;
  if (parser.iterate(padded.data(), body.size(), padded.size()).get(doc) || doc.get_object().get(obj)) return std::nullopt;
  bool seen = false;
  for (auto field : obj) {
    std::string_view key;
    od::array list;
    // Only "instances", once: any other key (signature_name, inputs, a duplicate) is
    // the DOM path's to judge.
    if (field.unescaped_key().get(key) || key != "instances" || seen || field.value().get_array().get(list)) return std::nullopt;
    seen = true;
    for (auto element : list) {
      od::value row;
      if (element.get(row) || !read_level(row, 0, dims, values)) return std::nullopt;
      ++rows;
    }
  }
  // Nothing after the object (this simdjson has no document::at_end(): past the last
  // token, current_location() is out of bounds).
  if (!seen || rows == 0 || doc.current_location().error() != simdjson::OUT_OF_BOUNDS) return std::nullopt;
  std::vector<int64_t> shape{rows};
  shape.insert(shape.end(), dims.begin(), dims.end());
  af::Tensor t(input.dtype, af::Shape(shape));
  if (static_cast<int64_t>(values.size()) != t.num_elements()) return std::nullopt;
  std::memcpy(t.raw_data(), values.data(), values.size() * sizeof(T));
  return t;
}

#endif

}  // namespace

std::optional<af::Tensor> read_float_instances(std::string_view body, const TensorSpec& input) {
#if AF_SERVE_SIMDJSON
  if (!input.shape.has_rank() || input.shape.rank() < 1) return std::nullopt;
  if (input.dtype == af::DType::f32) return read<float>(body, input);
  if (input.dtype == af::DType::f64) return read<double>(body, input);
#else
  (void)body;
  (void)input;
#endif
  return std::nullopt;
}

}  // namespace serve
