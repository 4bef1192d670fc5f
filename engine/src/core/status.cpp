#include "actorflow/status.h"

#include <exception>
#include <new>

namespace actorflow {

const char* code_name(Code c) {
  switch (c) {
    case Code::ok: return "OK";
    case Code::invalid_argument: return "InvalidArgument";
    case Code::not_found: return "NotFound";
    case Code::already_exists: return "AlreadyExists";
    case Code::failed_precondition: return "FailedPrecondition";
    case Code::out_of_range: return "OutOfRange";
    case Code::unimplemented: return "Unimplemented";
    case Code::internal: return "Internal";
    case Code::data_loss: return "DataLoss";
    case Code::cancelled: return "Cancelled";
    case Code::deadline_exceeded: return "DeadlineExceeded";
    case Code::unavailable: return "Unavailable";
    case Code::resource_exhausted: return "ResourceExhausted";
  }
  return "Unknown";
}

std::string Status::to_string() const {
  if (ok()) return "OK";
  return std::string(code_name(code_)) + ": " + message_;
}

Status Status::with_context(const std::string& context) const {
  if (ok()) return *this;
  return Status(code_, context + ": " + message_);
}

Status status_from_current_exception() {
  try {
    throw;
  } catch (const Error& e) {
    return e.status();
  } catch (const std::bad_alloc&) {
    return Status(Code::resource_exhausted, "out of memory (std::bad_alloc)");
  } catch (const std::exception& e) {
    return internal_error(std::string("exception: ") + e.what());
  } catch (...) {
    return internal_error("an exception of unknown type");
  }
}

}  // namespace actorflow
