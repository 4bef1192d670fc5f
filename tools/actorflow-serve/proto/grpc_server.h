// TF Serving's gRPC API: PredictionService.Predict and .GetModelMetadata, and
// ModelService.GetModelStatus, on gRPC's callback API. A predict goes through the same
// model registry and batcher as a REST one (so REST and gRPC requests merge into the same
// steps); only the decoding differs: TensorProto in and out instead of JSON.
//
// With a token, every call must carry the metadata `authorization: Bearer <token>`;
// others get UNAUTHENTICATED. Errors carry TF Serving's codes: INVALID_ARGUMENT for a
// bad request, NOT_FOUND for an unknown model or version, UNAVAILABLE while a model has
// no version loaded, RESOURCE_EXHAUSTED when the batch queue is full or too many calls
// are in flight.
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <actorflow/actorflow.h>

#include "batcher.h"
#include "metrics.h"
#include "model_registry.h"

namespace serve {

struct GrpcOptions {
  std::string host = "127.0.0.1";
  int port = 8500;                       // 0: any free port
  std::string auth_token;                // "": no token asked for
  int max_message_bytes = 16 << 20;      // larger requests get RESOURCE_EXHAUSTED
  // Admission, as HTTP's: Predict calls past this many in flight (decoded, queued or
  // running) get RESOURCE_EXHAUSTED at once; gRPC's buffers for calls being read are
  // bounded by max_in_flight_bytes (its resource quota).
  int64_t max_in_flight_requests = 128;
  uint64_t max_in_flight_bytes = 128ull << 20;
};

class GrpcServer {
 public:
  using Log = std::function<void(const std::string&)>;
  GrpcServer(GrpcOptions options, ModelRegistry& models, Batcher& batcher, Metrics& metrics, Log log);
  ~GrpcServer();  // shuts down at once if shutdown() was not called
  GrpcServer(const GrpcServer&) = delete;
  GrpcServer& operator=(const GrpcServer&) = delete;

  // Binds and starts serving on gRPC's own threads; the port is known afterwards.
  actorflow::Status start();
  int port() const;
  // Stops taking calls, waits up to `drain` for the calls in flight, then cancels the rest.
  void shutdown(std::chrono::milliseconds drain);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace serve
