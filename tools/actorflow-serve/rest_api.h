// TensorFlow Serving's REST API over plain request/response values, so that routing and
// the handlers know nothing of the HTTP library:
//   GET  /v1/models/NAME[/versions/N | /labels/L]            version statuses
//   GET  /v1/models/NAME[/versions/N | /labels/L]/metadata   the signature
//   POST /v1/models/NAME[/versions/N | /labels/L]:predict    row or columnar predict
//   GET  /metrics                                 Prometheus text
// Errors are {"error": "..."} with TF Serving's codes (400, 404, 405, 429, 503); what
// they quote of the request is a short printable prefix (echo.h).
#pragma once
#include <functional>
#include <string>

#include "batcher.h"
#include "metrics.h"
#include "model_registry.h"

namespace serve {

struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string target;  // path and query
  std::string body;
};

struct HttpResponse {
  int status = 200;
  std::string body;
  std::string content_type = "application/json";
};

HttpResponse error_response(int status, const std::string& message);

class RestApi {
 public:
  using Reply = std::function<void(HttpResponse)>;
  // Runs a task on the thread that owns the request (at once when called there).
  using Post = std::function<void(std::function<void()>)>;
  RestApi(ModelRegistry& models, Batcher& batcher, Metrics& metrics) : models_(models), batcher_(batcher), metrics_(metrics) {}

  // Calls `reply` exactly once, on the request's own thread: at once, or through `post`
  // once a batched predict is done (its answer is written there too, so that the
  // batch worker only runs steps). The request is taken: its body is freed once read,
  // before the step.
  void handle(HttpRequest req, Reply reply, const Post& post);

 private:
  HttpResponse model_status(const ModelManager& model, int64_t version) const;
  HttpResponse metadata(const LoadedModel& m) const;
  void predict(std::shared_ptr<const LoadedModel> m, std::string body, Reply reply, const Post& post);

  ModelRegistry& models_;
  Batcher& batcher_;
  Metrics& metrics_;
};

}  // namespace serve
