#include "instances_reader.h"

#include <cmath>
#include <cstring>
#include <vector>

#if AF_SERVE_SIMDJSON
#include <simdjson.h>
#else
#include <nlohmann/json.hpp>
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

#else
using json = nlohmann::json;

// Returning false from any event stops the parse: the body is left to the DOM path.
template <typename T>
class InstancesReader final : public nlohmann::json_sax<json> {
 public:
  explicit InstancesReader(std::vector<int64_t> row_dims) : dims_(std::move(row_dims)), counts_(dims_.size() + 1, 0) {}

  bool null() override { return false; }
  bool boolean(bool) override { return false; }
  bool number_integer(number_integer_t v) override { return value(static_cast<double>(v)); }
  bool number_unsigned(number_unsigned_t v) override { return value(static_cast<double>(v)); }
  bool number_float(number_float_t v, const string_t&) override { return value(v); }
  bool string(string_t&) override { return false; }
  bool binary(binary_t&) override { return false; }

  bool start_object(std::size_t) override {
    if (objects_ != 0 || depth_ != 0) return false;
    objects_ = 1;
    return true;
  }
  bool key(string_t& k) override {
    if (objects_ != 1 || depth_ != 0 || seen_ || k != "instances") return false;
    seen_ = true;
    expecting_ = true;
    return true;
  }
  bool end_object() override {
    if (objects_ != 1 || depth_ != 0) return false;
    objects_ = 0;
    return true;
  }

  bool start_array(std::size_t) override {
    if (depth_ == 0) {
      if (!expecting_) return false;
      expecting_ = false;
    } else {
      if (static_cast<size_t>(depth_) > dims_.size()) return false;  // deeper than a row
      ++counts_[static_cast<size_t>(depth_) - 1];
    }
    counts_[static_cast<size_t>(depth_)] = 0;
    ++depth_;
    return true;
  }
  bool end_array() override {
    size_t level = static_cast<size_t>(depth_) - 1;
    if (level == 0) {
      rows_ = counts_[0];
    } else {
      // A row's dimension: an unknown one takes the first row's size, as the DOM path does.
      int64_t& want = dims_[level - 1];
      if (want < 0) want = counts_[level];
      if (counts_[level] != want) return false;
    }
    --depth_;
    return true;
  }

  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override { return false; }

  // Whole and well formed: one object holding the instances, at least one row.
  bool complete() const { return seen_ && !expecting_ && objects_ == 0 && depth_ == 0 && rows_ > 0; }
  int64_t rows() const { return rows_; }
  const std::vector<int64_t>& row_dims() const { return dims_; }
  const std::vector<T>& values() const { return values_; }

 private:
  // The DOM path converts a number through double (json::get<double>); so does this.
  bool value(double v) {
    if (static_cast<size_t>(depth_) != dims_.size() + 1) return false;  // a number where a list belongs
    ++counts_[static_cast<size_t>(depth_) - 1];
    values_.push_back(static_cast<T>(v));
    return true;
  }

  std::vector<int64_t> dims_;    // of one row; -1 until the first row tells
  std::vector<int64_t> counts_;  // values or lists seen in each open list
  std::vector<T> values_;
  int depth_ = 0;                // lists open inside "instances"
  int objects_ = 0;
  int64_t rows_ = 0;
  bool seen_ = false, expecting_ = false;
};

template <typename T>
std::optional<af::Tensor> read(std::string_view body, const TensorSpec& input) {
  InstancesReader<T> reader(std::vector<int64_t>(input.shape.dims().begin() + 1, input.shape.dims().end()));
  if (!json::sax_parse(body.begin(), body.end(), &reader) || !reader.complete()) return std::nullopt;
  std::vector<int64_t> dims{reader.rows()};
  dims.insert(dims.end(), reader.row_dims().begin(), reader.row_dims().end());
  af::Tensor t(input.dtype, af::Shape(dims));
  if (static_cast<int64_t>(reader.values().size()) != t.num_elements()) return std::nullopt;
  std::memcpy(t.raw_data(), reader.values().data(), reader.values().size() * sizeof(T));
  return t;
}
#endif

}  // namespace

std::optional<af::Tensor> read_float_instances(std::string_view body, const TensorSpec& input) {
  if (!input.shape.has_rank() || input.shape.rank() < 1) return std::nullopt;
  if (input.dtype == af::DType::f32) return read<float>(body, input);
  if (input.dtype == af::DType::f64) return read<double>(body, input);
  return std::nullopt;
}

}  // namespace serve
