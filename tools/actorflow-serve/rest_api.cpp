#include "rest_api.h"

#include <nlohmann/json.hpp>

#include "echo.h"
#include "tensor_json.h"

namespace serve {

namespace af = actorflow;
using json = nlohmann::json;

HttpResponse error_response(int status, const std::string& message) {
  // "replace": a message may quote invalid UTF-8 from the request.
  return HttpResponse{status, json{{"error", message}}.dump(-1, ' ', false, json::error_handler_t::replace)};
}

namespace {

struct Route {
  std::string model;
  int64_t version = 0;  // 0: not named
  std::string label;    // "": not named
  std::string verb;     // "", "metadata", "predict", or something unknown
};

// /v1/models/NAME[/versions/N | /labels/L][/metadata | :VERB], without the query. (Not std::regex:
// its matcher recurses per character, and a path may be as long as the header limit.)
bool parse_route(std::string path, Route* r) {
  const std::string prefix = "/v1/models/";
  if (path.rfind(prefix, 0) != 0) return false;
  path = path.substr(prefix.size());
  if (!path.empty() && path.back() == '/') path.pop_back();
  if (auto colon = path.rfind(':'); colon != std::string::npos) {
    r->verb = path.substr(colon + 1);
    path = path.substr(0, colon);
    if (r->verb.empty()) return false;
  } else if (path.size() > 9 && path.compare(path.size() - 9, 9, "/metadata") == 0) {
    r->verb = "metadata";
    path = path.substr(0, path.size() - 9);
  }
  if (auto v = path.find("/versions/"); v != std::string::npos) {
    std::string digits = path.substr(v + 10);
    if (digits.empty() || digits.size() > 18 || digits.find_first_not_of("0123456789") != std::string::npos) return false;
    r->version = std::stoll(digits);
    path = path.substr(0, v);
  } else if (auto l = path.find("/labels/"); l != std::string::npos) {
    r->label = path.substr(l + 8);
    if (r->label.empty() || r->label.find_first_of("/:") != std::string::npos) return false;
    path = path.substr(0, l);
  }
  if (path.empty() || path.find_first_of("/:") != std::string::npos) return false;
  r->model = path;
  return true;
}

// Strings from files and paths may hold invalid UTF-8; "replace" keeps the JSON valid.
std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

int http_status(const af::Status& s) {
  switch (s.code()) {
    case af::Code::invalid_argument:
    case af::Code::out_of_range: return 400;
    case af::Code::not_found: return 404;
    case af::Code::unavailable: return 503;
    case af::Code::resource_exhausted: return 429;
    case af::Code::deadline_exceeded: return 504;
    default: return 500;
  }
}

}  // namespace

void RestApi::handle(HttpRequest req, Reply reply, const Post& post) {
  std::string path = req.target.substr(0, req.target.find('?'));
  if (path == "/metrics") {
    if (req.method != "GET") return reply(error_response(405, "/metrics takes GET"));
    std::vector<std::pair<std::string, int64_t>> served;
    for (auto& m : models_.all()) {
      auto current = m->current();
      served.emplace_back(m->name(), current ? current->version : 0);
    }
    return reply(HttpResponse{200, metrics_.render(served), "text/plain; version=0.0.4; charset=utf-8"});
  }
  Route route;
  if (!parse_route(path, &route)) return reply(error_response(404, "no such path: " + echo(path, 256)));
  ModelManager* model = models_.find(route.model);
  if (!model) return reply(error_response(404, "Servable not found for request: model '" + echo(route.model) + "'"));
  if (route.verb.empty()) {
    if (req.method != "GET") return reply(error_response(405, echo(path, 256) + " takes GET"));
    int64_t version = route.version;
    if (!route.label.empty()) {
      auto l = model->options().labels.find(route.label);
      if (l == model->options().labels.end())
        return reply(error_response(400, "model '" + model->name() + "' has no version label '" + echo(route.label) + "'"));
      version = l->second;
    }
    return reply(model_status(*model, version));
  }
  if (route.verb != "metadata" && route.verb != "predict")
    return reply(error_response(404, "unknown method ':" + echo(route.verb) + "' (this server has :predict)"));
  const char* method = route.verb == "metadata" ? "GET" : "POST";
  if (req.method != method) return reply(error_response(405, echo(path, 256) + " takes " + method));
  // The request keeps this version alive until it is answered, whatever a swap does.
  auto m = model->find(route.version, route.label);
  if (!m.ok()) return reply(error_response(http_status(m.status()), m.status().message()));
  if (route.verb == "metadata") return reply(metadata(**m));
  predict(std::move(*m), std::move(req.body), std::move(reply), post);
}

HttpResponse RestApi::model_status(const ModelManager& model, int64_t version) const {
  json list = json::array();
  for (auto& s : model.statuses()) {
    if (version && s.version != version) continue;
    list.push_back({{"version", std::to_string(s.version)},
                    {"state", s.state},
                    {"status", {{"error_code", s.error_code}, {"error_message", s.error_message}}}});
  }
  if (version && list.empty()) return error_response(404, "version " + std::to_string(version) + " of model '" + model.name() + "' was never seen");
  return HttpResponse{200, dump(json{{"model_version_status", list}})};
}

HttpResponse RestApi::metadata(const LoadedModel& m) const {
  json sig;
  sig["inputs"][m.input_name] = tensor_info_json({m.input_name, m.input_dtype, m.input_shape});
  sig["outputs"][m.output_name] = tensor_info_json({m.output_name, m.output_dtype, m.output_shape});
  sig["method_name"] = "tensorflow/serving/predict";
  json doc;
  doc["model_spec"] = {{"name", m.model_name}, {"signature_name", ""}, {"version", std::to_string(m.version)}};
  doc["metadata"]["signature_def"]["signature_def"]["serving_default"] = sig;
  return HttpResponse{200, dump(doc)};
}

void RestApi::predict(std::shared_ptr<const LoadedModel> m, std::string body, Reply reply, const Post& post) {
  auto in = parse_predict_request(body, TensorSpec{m->input_name, m->input_dtype, m->input_shape});
  std::string().swap(body);  // the values are in the tensor now; the step need not hold both
  if (!in.ok()) return reply(error_response(http_status(in.status()), in.status().message()));
  bool columnar = in->columnar;
  batcher_.submit(std::move(m), std::move(in->tensor), [reply = std::move(reply), post, columnar](af::Result<af::Tensor> y) mutable {
    post([reply = std::move(reply), y = std::move(y), columnar] {
      if (!y.ok()) return reply(error_response(http_status(y.status()), y.status().message()));
      reply(HttpResponse{200, predict_response(*y, columnar)});
    });
  });
}

}  // namespace serve
