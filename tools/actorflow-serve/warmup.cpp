#include "warmup.h"

#include <chrono>
#include <cstdio>
#include <filesystem>

#if AF_SERVE_GRPC
#include "proto/warmup_log.h"
#endif

namespace serve {

namespace af = actorflow;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

// Zeros of `rows` rows in the input's shape (its other unknown dims taken as 1).
af::Tensor zeros(const LoadedModel& m, int64_t rows) {
  std::vector<int64_t> dims = m.input_shape.has_rank() ? m.input_shape.dims() : std::vector<int64_t>{-1};
  if (dims.empty()) dims.push_back(-1);
  dims[0] = rows;
  for (auto& d : dims)
    if (d < 0) d = 1;
  return af::Tensor::zeros(m.input_dtype, af::Shape(dims));
}

std::string ms(Clock::duration d) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f ms", std::chrono::duration<double, std::milli>(d).count());
  return buf;
}

}  // namespace

af::Status warm_up(const LoadedModel& m, const WarmupOptions& options, const BatchOptions& batching,
                   const std::function<void(const std::string&)>& log) {
  const std::string which = "version " + std::to_string(m.version) + " of model '" + m.model_name + "'";
  auto start = Clock::now();
  std::error_code ec;
  fs::path file = fs::path(m.dir) / kWarmupFile;
  if (fs::exists(file, ec)) {
#if AF_SERVE_GRPC
    auto inputs = read_warmup_requests(file.string(), m, kMaxWarmupRecords);
    if (!inputs.ok()) return af::Status(inputs.status().code(), "warm-up of " + which + ": " + inputs.status().message());
    for (size_t i = 0; i < inputs->size(); ++i) {
      auto y = m.model.predict((*inputs)[i]);
      if (!y.ok()) return af::Status(y.status().code(), "warm-up of " + which + ": record " + std::to_string(i + 1) + " of " + file.string() + ": " + y.status().message());
    }
    log("warmed up " + which + " with the " + std::to_string(inputs->size()) + " requests of " + file.string() + " in " + ms(Clock::now() - start));
    return af::Status::OK();
#else
    return af::unimplemented("warm-up of " + which + ": " + file.string() + " needs protobuf, and this build has none");
#endif
  }
  if (options.requests <= 0) return af::Status::OK();
  std::vector<int64_t> shapes = {1};
  if (batching.enabled && batching.max_batch_size > 1) shapes.push_back(batching.max_batch_size);
  for (int64_t rows : shapes) {
    af::Tensor x = zeros(m, rows);
    for (int64_t i = 0; i < options.requests; ++i) {
      auto y = m.model.predict(x);
      if (!y.ok()) return af::Status(y.status().code(), "warm-up of " + which + " (" + std::to_string(rows) + " rows of zeros): " + y.status().message());
    }
  }
  log("warmed up " + which + " with " + std::to_string(options.requests) + " predicts of zeros per shape in " + ms(Clock::now() - start));
  return af::Status::OK();
}

}  // namespace serve
