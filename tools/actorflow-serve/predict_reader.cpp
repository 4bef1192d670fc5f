#include "predict_reader.h"

#include <cstdint>
#include <new>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "echo.h"
#include "value_buffer.h"

namespace serve {

namespace af = actorflow;
using json = nlohmann::json;

namespace {

enum class Kind { list, object, string, boolean, null, number };

const char* kind_text(Kind k) {
  switch (k) {
    case Kind::list: return "a list";
    case Kind::object: return "an object";
    case Kind::string: return "a string";
    case Kind::boolean: return "a boolean";
    case Kind::null: return "null";
    default: return "a number";
  }
}

// A JSON number as the lexer read it.
struct Number {
  enum Type { integer, unsigned_integer, floating } type = integer;
  int64_t i = 0;
  uint64_t u = 0;
  double d = 0;
  // As the DOM reader converted every number for a float input (json::get<double>).
  double as_double() const { return type == integer ? static_cast<double>(i) : type == unsigned_integer ? static_cast<double>(u) : d; }
};

bool takes_dtype(af::DType t) {
  switch (t) {
    case af::DType::f32:
    case af::DType::f64:
    case af::DType::i32:
    case af::DType::i64:
    case af::DType::u8:
    case af::DType::boolean: return true;
    default: return false;
  }
}

// The events of one body, in order. Each container opened pushes a frame naming its role;
// the input's lists (role tensor) also count their values, per level, to check the shape
// as they close. A fault in the input's values is kept (the first one) while the parse
// goes on, so that the faults the DOM reader checked first still come first.
class PredictReader final : public nlohmann::json_sax<json> {
 public:
  PredictReader(const TensorSpec& spec, size_t body_bytes)
      // A value takes at least two bytes of the body ("0,"), the last one one.
      : spec_(spec), values_(body_bytes / 2 + 1, af::dtype_size(spec.dtype)) {}

  bool null() override { return scalar(Kind::null, nullptr, false, nullptr); }
  bool boolean(bool b) override { return scalar(Kind::boolean, nullptr, b, nullptr); }
  bool number_integer(number_integer_t v) override {
    Number n;
    n.i = v;
    return scalar(Kind::number, &n, false, nullptr);
  }
  bool number_unsigned(number_unsigned_t v) override {
    Number n;
    n.type = Number::unsigned_integer;
    n.u = v;
    return scalar(Kind::number, &n, false, nullptr);
  }
  bool number_float(number_float_t v, const string_t&) override {
    Number n;
    n.type = Number::floating;
    n.d = v;
    return scalar(Kind::number, &n, false, nullptr);
  }
  bool string(string_t& s) override { return scalar(Kind::string, nullptr, false, &s); }
  bool binary(binary_t&) override { return scalar(Kind::string, nullptr, false, nullptr); }  // not in JSON text

  bool start_object(std::size_t) override { return open(false); }
  bool start_array(std::size_t) override { return open(true); }
  bool end_object() override { return close(); }
  bool end_array() override { return close(); }

  bool key(string_t& k) override {
    switch (stack_.back()) {
      case Role::top:
        pending_ = Key::other;
        if (k == "signature_name") {
          pending_ = Key::signature;
        } else if (k == "instances" || k == "inputs") {
          bool rows = k == "instances";
          if (rows ? seen_inputs_ : seen_instances_) {
            both_ = true;  // refused at the end; the value is skipped
          } else {
            // A repeated key: the last one wins, as in nlohmann's DOM.
            (rows ? seen_instances_ : seen_inputs_) = true;
            reset_input(!rows);
            pending_ = rows ? Key::instances : Key::inputs;
          }
        }
        return true;
      case Role::named:
        if (k == spec_.name && !named_seen_) {
          named_seen_ = true;
          pending_ = Key::input_name;
        } else {
          fail(k == spec_.name ? named_where_ + " names '" + spec_.name + "' twice"
                               : named_where_ + " names '" + echo(k) + "', not an input of the model (its input is '" + spec_.name + "')");
          pending_ = Key::other;
        }
        return true;
      default:
        return true;  // inside a skipped value
    }
  }

  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    // The lexer's message quotes the last token read, which may be most of the body.
    syntax_error_ = "malformed JSON: " + echo(e.what(), 200);
    return false;
  }

  af::Result<PredictInput> finish(bool parsed) {
    if (!syntax_error_.empty()) return af::invalid_argument(syntax_error_);
    if (!fatal_.ok()) return fatal_;
    if (!parsed || !done_) return af::invalid_argument("malformed JSON: the body ends inside a value");
    if (!sig_error_.empty()) return af::invalid_argument(sig_error_);
    if (both_ || seen_instances_ == seen_inputs_)
      return af::invalid_argument("the request must have exactly one of \"instances\" and \"inputs\"");
    if (error_) return *error_;
    std::vector<int64_t> dims = dims_;
    if (!columnar_) dims.insert(dims.begin(), rows_);
    // A dimension no list reached (inside an empty list) holds nothing.
    for (auto& d : dims)
      if (d < 0) d = 0;
    af::Shape shape(dims);
    if (static_cast<size_t>(shape.num_elements()) * af::dtype_size(spec_.dtype) != values_.bytes())
      return af::internal_error("the values read do not fill shape " + shape.to_string());
    PredictInput out;
    out.columnar = columnar_;
    out.tensor = values_.take(spec_.dtype, std::move(shape));
    return out;
  }

  bool buffer_ok() const { return values_.ok(); }

 private:
  enum class Role : uint8_t { top, skip, instances, named, tensor };
  enum class Key : uint8_t { other, signature, instances, inputs, input_name };
  // What the next value is.
  enum class Next : uint8_t { document, skip, signature, instances, inputs, row, input_value, element };

  Next next() const {
    if (stack_.empty()) return Next::document;
    switch (stack_.back()) {
      case Role::top:
        switch (pending_) {
          case Key::signature: return Next::signature;
          case Key::instances: return Next::instances;
          case Key::inputs: return Next::inputs;
          default: return Next::skip;
        }
      case Role::instances: return Next::row;
      case Role::named: return pending_ == Key::input_name ? Next::input_value : Next::skip;
      case Role::tensor: return Next::element;
      default: return Next::skip;
    }
  }

  bool open(bool array) {
    if (stack_.size() >= static_cast<size_t>(kMaxJsonDepth))
      return stop(af::invalid_argument("the JSON nests deeper than " + std::to_string(kMaxJsonDepth) + " levels"));
    Kind kind = array ? Kind::list : Kind::object;
    switch (next()) {
      case Next::document:
        if (array) return stop(not_an_object());
        stack_.push_back(Role::top);
        return true;
      case Next::skip:
        stack_.push_back(Role::skip);
        return true;
      case Next::signature:
        sig_error_ = std::string("unknown signature_name (") + kind_text(kind) + "): the model has 'serving_default'";
        stack_.push_back(Role::skip);
        return true;
      case Next::instances:
        if (!array) fail("\"instances\" must be a non-empty list");
        stack_.push_back(array ? Role::instances : Role::skip);
        return true;
      case Next::inputs:
        base_ = "inputs";
        if (!array) return open_named("\"inputs\"");
        tensor_container(true);
        return true;
      case Next::row:
        begin_row();
        if (!array) return open_named(base_);
        tensor_container(true);
        return true;
      case Next::input_value:
      case Next::element:
        tensor_container(array);
        return true;
    }
    return true;
  }

  bool close() {
    Role r = stack_.back();
    stack_.pop_back();
    switch (r) {
      case Role::top: done_ = true; break;
      case Role::instances:
        if (rows_ == 0) fail("\"instances\" must be a non-empty list");
        break;
      case Role::named:
        if (!named_seen_) fail(named_where_ + " lacks input '" + spec_.name + "'");
        break;
      case Role::tensor: end_tensor_list(); break;
      case Role::skip: break;
    }
    return true;
  }

  bool scalar(Kind kind, const Number* n, bool b, const std::string* s) {
    switch (next()) {
      case Next::document: return stop(not_an_object());
      case Next::skip: return true;
      case Next::signature:
        if (kind != Kind::string || !s)
          sig_error_ = std::string("unknown signature_name (") + kind_text(kind) + "): the model has 'serving_default'";
        else if (*s == "serving_default" || s->empty())
          sig_error_.clear();  // the last one counts
        else
          sig_error_ = "unknown signature_name \"" + echo(*s) + "\": the model has 'serving_default'";
        return true;
      case Next::instances: fail("\"instances\" must be a non-empty list"); return true;
      case Next::inputs: fail(inputs_error()); return true;
      case Next::row: begin_row(); break;
      case Next::input_value:
      case Next::element: break;
    }
    count_in_parent();
    size_t level = level_;
    if (level == 0 && columnar_) {
      fail(inputs_error());
    } else if (level < dims_.size()) {
      shape_error(where(level) + " is " + kind_text(kind) + " where a list of " + dim_text(level) + " values belongs");
    } else {
      leaf(kind, n, b, level);
    }
    return true;
  }

  // A named value, {"<input>": value}: its key is checked, its value read as the input.
  bool open_named(const std::string& where) {
    stack_.push_back(Role::named);
    named_where_ = where;
    named_seen_ = false;
    pending_ = Key::other;
    return true;
  }

  void begin_row() {
    ++rows_;
    base_ = "instances[" + std::to_string(rows_ - 1) + "]";
  }

  // A list or object where a value of the input belongs, at level_.
  void tensor_container(bool array) {
    count_in_parent();
    size_t level = level_;
    if (array && level < dims_.size()) {
      stack_.push_back(Role::tensor);
      counts_[level] = 0;
      ++level_;
      return;
    }
    if (level == 0 && columnar_) fail(inputs_error());
    else if (level < dims_.size()) shape_error(where(level) + " is an object where a list of " + dim_text(level) + " values belongs");
    else dtype_error(where(level), array ? Kind::list : Kind::object);
    stack_.push_back(Role::skip);
  }

  // One more value in the innermost open list of the input.
  void count_in_parent() {
    if (level_ == 0) return;
    size_t k = level_ - 1;
    ++counts_[k];
    // More values than the dimension holds: the list's count is told when it closes, and
    // what is wrong inside it meanwhile is not (the DOM reader checked counts first).
    if (dims_[k] >= 0 && counts_[k] == dims_[k] + 1 && overflow_level_ < 0) overflow_level_ = static_cast<int>(k);
  }

  void end_tensor_list() {
    size_t k = --level_;
    int64_t n = counts_[k];
    if (overflow_level_ == static_cast<int>(k)) overflow_level_ = -1;
    if (k == 0 && columnar_ && n == 0) return fail(inputs_error());
    if (dims_[k] < 0) dims_[k] = n;  // an unknown dimension takes the first list's size
    if (n != dims_[k])
      shape_error(where(k) + " has " + std::to_string(n) + " values at dimension " + std::to_string(k + offset_) + ", not " +
                  std::to_string(dims_[k]));
  }

  void leaf(Kind kind, const Number* n, bool b, size_t level) {
    switch (spec_.dtype) {
      case af::DType::f32:
        if (kind != Kind::number) return dtype_error(where(level), kind);
        return store(static_cast<float>(n->as_double()));
      case af::DType::f64:
        if (kind != Kind::number) return dtype_error(where(level), kind);
        return store(n->as_double());
      case af::DType::i32:
      case af::DType::i64:
      case af::DType::u8: {
        if (kind != Kind::number || n->type == Number::floating || (n->type == Number::unsigned_integer && n->u > uint64_t(INT64_MAX)))
          return dtype_error(where(level), kind);
        int64_t x = n->type == Number::integer ? n->i : static_cast<int64_t>(n->u);
        if (spec_.dtype == af::DType::i64) return store(x);
        if (spec_.dtype == af::DType::i32) {
          if (x < INT32_MIN || x > INT32_MAX) return fail(expectation() + ": " + where(level) + " is out of int32's range");
          return store(static_cast<int32_t>(x));
        }
        if (x < 0 || x > 255) return fail(expectation() + ": " + where(level) + " is out of uint8's range");
        return store(static_cast<uint8_t>(x));
      }
      case af::DType::boolean:
        if (kind != Kind::boolean) return dtype_error(where(level), kind);
        return store(static_cast<uint8_t>(b));
      default:
        return fail(expectation() + ": this server does not take " + af::dtype_name(spec_.dtype) + " inputs");
    }
  }

  template <typename T>
  void store(T x) {
    if (!values_.push(x)) fail("the body holds more values than it has room for");
  }

  // Starts over reading the input: at "instances" or "inputs" (again).
  void reset_input(bool columnar) {
    columnar_ = columnar;
    values_.clear();
    rows_ = 0;
    error_.reset();
    overflow_level_ = -1;
    level_ = 0;
    offset_ = columnar ? 0 : 1;
    const auto& all = spec_.shape.dims();
    dims_.assign(all.begin() + (columnar ? 0 : 1), all.end());
    if (columnar) dims_[0] = -1;  // the batch: as many rows as the list holds
    counts_.assign(dims_.size(), 0);
  }

  std::string where(size_t level) const {
    std::string w = base_;
    for (size_t j = 0; j < level; ++j) w += "[" + std::to_string(counts_[j] - 1) + "]";
    return w;
  }
  std::string dim_text(size_t level) const { return dims_[level] < 0 ? "any number of" : std::to_string(dims_[level]); }
  std::string shape_text() const {
    std::string s = "[";
    for (int i = 0; i < spec_.shape.rank(); ++i) s += (i ? "," : "") + std::to_string(spec_.shape.dim(i));
    return s + "]";
  }
  std::string expectation() const {
    return "input '" + spec_.name + "' expects " + af::dtype_name(spec_.dtype) + " of shape " + shape_text();
  }
  std::string inputs_error() const { return "\"inputs\" must hold a non-empty list of rows for '" + spec_.name + "'"; }
  static af::Status not_an_object() {
    return af::invalid_argument("the request must be a JSON object with \"instances\" or \"inputs\"");
  }

  void fail(std::string message) {
    if (!error_ && overflow_level_ < 0) error_ = af::invalid_argument(std::move(message));
  }
  void shape_error(const std::string& what) { fail(expectation() + ": " + what); }
  void dtype_error(const std::string& where, Kind kind) {
    fail(expectation() + ": " + where + " is " + kind_text(kind) + ", not a " + af::dtype_name(spec_.dtype) + " value");
  }
  // Ends the parse (returning false to the SAX parser).
  bool stop(af::Status s) {
    fatal_ = std::move(s);
    return false;
  }

  const TensorSpec& spec_;
  ValueBuffer values_;
  std::vector<Role> stack_;  // the containers open, at most kMaxJsonDepth
  Key pending_ = Key::other;  // what the value after the last key is
  bool seen_instances_ = false, seen_inputs_ = false, both_ = false, done_ = false;
  std::string sig_error_, syntax_error_;
  af::Status fatal_;
  std::optional<af::Status> error_;  // the first fault in the input's values

  // The input being read.
  bool columnar_ = false;
  std::vector<int64_t> dims_;    // rows: a row's dims; columnar: the tensor's, led by the batch
  std::vector<int64_t> counts_;  // values so far in the open list of each level
  size_t level_ = 0;             // the input's lists open
  size_t offset_ = 1;            // the dimension number of level 0 in messages
  int overflow_level_ = -1;      // a list holding more values than its dimension, until it closes
  int64_t rows_ = 0;
  std::string base_;             // "instances[i]" or "inputs": what messages call level 0
  std::string named_where_;      // the open {"<input>": value}, for messages
  bool named_seen_ = false;
};

}  // namespace

af::Result<PredictInput> read_predict_request(std::string_view body, const TensorSpec& input) {
  if (!input.shape.has_rank() || input.shape.rank() < 1)
    return af::invalid_argument("input '" + input.name + "' has no batch dimension to fill");
  if (!takes_dtype(input.dtype))
    return af::invalid_argument("input '" + input.name + "': this server does not take " + af::dtype_name(input.dtype) + " inputs");
  try {
    PredictReader reader(input, body.size());
    if (!reader.buffer_ok()) return af::resource_exhausted("no memory for the values of a " + std::to_string(body.size()) + "-byte body");
    bool parsed = json::sax_parse(body.data(), body.data() + body.size(), &reader);
    return reader.finish(parsed);
  } catch (const std::bad_alloc&) {
    return af::resource_exhausted("out of memory reading a " + std::to_string(body.size()) + "-byte body");
  } catch (const std::exception& e) {
    return af::invalid_argument(std::string("malformed JSON: ") + echo(e.what(), 200));
  }
}

}  // namespace serve
