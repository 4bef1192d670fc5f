// ActorFlow's one error rule (README, "Errors"): building a graph (the DSL, layers,
// optimizers' minimize, the Saver's constructor) and constructing tensors throw
// af::Error, carrying a Status, at once on the user's thread, as TF1's Python raises at
// build time; whatever touches files, the network or a session returns a Status or a
// Result<T> (Session::create, run, Saver::save, SummaryWriter::create, the readers).
// Nothing throws across actors.
#pragma once
#include "actorflow/api.h"
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>

AF_PUBLIC_BEGIN

namespace actorflow {

enum class Code : int {
  ok = 0,
  invalid_argument,
  not_found,
  already_exists,
  failed_precondition,
  out_of_range,
  unimplemented,
  internal,
  data_loss,
  cancelled,
  deadline_exceeded,
  unavailable,
  resource_exhausted,
};

const char* code_name(Code c);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}
  static Status OK() { return {}; }

  bool ok() const { return code_ == Code::ok; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }
  std::string to_string() const;
  // Prefix context ("while running node 'x': ...") keeping the code.
  Status with_context(const std::string& context) const;

 private:
  Code code_ = Code::ok;
  std::string message_;
};

inline Status invalid_argument(std::string m) { return {Code::invalid_argument, std::move(m)}; }
inline Status not_found(std::string m) { return {Code::not_found, std::move(m)}; }
inline Status failed_precondition(std::string m) { return {Code::failed_precondition, std::move(m)}; }
inline Status out_of_range(std::string m) { return {Code::out_of_range, std::move(m)}; }
inline Status unimplemented(std::string m) { return {Code::unimplemented, std::move(m)}; }
inline Status internal_error(std::string m) { return {Code::internal, std::move(m)}; }
inline Status data_loss(std::string m) { return {Code::data_loss, std::move(m)}; }
inline Status cancelled(std::string m) { return {Code::cancelled, std::move(m)}; }
inline Status deadline_exceeded(std::string m) { return {Code::deadline_exceeded, std::move(m)}; }
inline Status resource_exhausted(std::string m) { return {Code::resource_exhausted, std::move(m)}; }

// The exception the user-facing API throws; it carries the Status.
class Error : public std::runtime_error {
 public:
  explicit Error(Status s) : std::runtime_error(s.to_string()), status_(std::move(s)) {}
  const Status& status() const { return status_; }

 private:
  Status status_;
};

// The Status an exception caught at a boundary stands for: an af::Error's own status, a
// failed allocation as resource_exhausted, anything else as internal with its what().
// Call it inside a catch (...) block.
Status status_from_current_exception();

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}
  Result(Status status) : v_(std::move(status)) {
    if (std::get<Status>(v_).ok()) v_ = Status(Code::internal, "Result constructed from OK status");
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  Status status() const { return ok() ? Status::OK() : std::get<Status>(v_); }

  // Accessors throw af::Error when the Result holds an error: reaching for a value that
  // is not there is a programming error on the user's side of the API.
  T& value() & { check(); return std::get<T>(v_); }
  const T& value() const& { check(); return std::get<T>(v_); }
  T&& value() && { check(); return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  void check() const {
    if (!ok()) throw Error(std::get<Status>(v_));
  }
  std::variant<T, Status> v_;
};

inline void throw_if_error(const Status& s) {
  if (!s.ok()) throw Error(s);
}

}  // namespace actorflow

#define AF_CONCAT_INNER(a, b) a##b
#define AF_CONCAT(a, b) AF_CONCAT_INNER(a, b)

#define AF_RETURN_IF_ERROR(expr)                    \
  do {                                              \
    ::actorflow::Status _af_st = (expr);            \
    if (!_af_st.ok()) return _af_st;                \
  } while (0)

#define AF_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                             \
  if (!tmp.ok()) return tmp.status();            \
  lhs = std::move(tmp).value()

#define AF_ASSIGN_OR_RETURN(lhs, expr) \
  AF_ASSIGN_OR_RETURN_IMPL(AF_CONCAT(_af_res_, __LINE__), lhs, expr)

AF_PUBLIC_END
