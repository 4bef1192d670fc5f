#include "grpc_server.h"

#include <absl/synchronization/mutex.h>
#include <grpcpp/grpcpp.h>

#include <atomic>

#include "echo.h"
#include "message_pool.h"
#include "tensor_proto.h"
#include "tensorflow_serving/apis/model_service.grpc.pb.h"
#include "tensorflow_serving/apis/prediction_service.grpc.pb.h"

namespace serve {

namespace af = actorflow;
namespace tfs = tensorflow::serving;
using Clock = std::chrono::steady_clock;

namespace {

grpc::StatusCode grpc_code(af::Code c) {
  switch (c) {
    case af::Code::ok: return grpc::StatusCode::OK;
    case af::Code::invalid_argument: return grpc::StatusCode::INVALID_ARGUMENT;
    case af::Code::not_found: return grpc::StatusCode::NOT_FOUND;
    case af::Code::already_exists: return grpc::StatusCode::ALREADY_EXISTS;
    case af::Code::failed_precondition: return grpc::StatusCode::FAILED_PRECONDITION;
    case af::Code::out_of_range: return grpc::StatusCode::OUT_OF_RANGE;
    case af::Code::unimplemented: return grpc::StatusCode::UNIMPLEMENTED;
    case af::Code::internal: return grpc::StatusCode::INTERNAL;
    case af::Code::data_loss: return grpc::StatusCode::DATA_LOSS;
    case af::Code::cancelled: return grpc::StatusCode::CANCELLED;
    case af::Code::deadline_exceeded: return grpc::StatusCode::DEADLINE_EXCEEDED;
    case af::Code::unavailable: return grpc::StatusCode::UNAVAILABLE;
    case af::Code::resource_exhausted: return grpc::StatusCode::RESOURCE_EXHAUSTED;
  }
  return grpc::StatusCode::UNKNOWN;
}

grpc::Status to_grpc(const af::Status& s) { return s.ok() ? grpc::Status::OK : grpc::Status(grpc_code(s.code()), s.message()); }

tensorflow::error::Code tf_error_code(af::Code c) { return static_cast<tensorflow::error::Code>(grpc_code(c)); }

tfs::ModelVersionStatus::State tf_state(const std::string& s) {
  if (s == "LOADING") return tfs::ModelVersionStatus::LOADING;
  if (s == "AVAILABLE") return tfs::ModelVersionStatus::AVAILABLE;
  if (s == "UNLOADING") return tfs::ModelVersionStatus::UNLOADING;
  if (s == "END") return tfs::ModelVersionStatus::END;
  if (s == "START") return tfs::ModelVersionStatus::START;
  return tfs::ModelVersionStatus::UNKNOWN;
}

// Compares in time independent of where the first difference is.
bool same_token(std::string_view a, std::string_view b) {
  unsigned diff = a.size() != b.size();
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i]) ^ static_cast<unsigned char>(b[i % std::max<size_t>(1, b.size())]);
  return diff == 0;
}

void fill_spec(const LoadedModel& m, tfs::ModelSpec* spec, bool with_signature) {
  spec->set_name(m.model_name);
  spec->mutable_version()->set_value(m.version);
  if (with_signature) spec->set_signature_name("serving_default");
}

}  // namespace

// What the services share.
struct Shared {
  GrpcOptions options;
  ModelRegistry& models;
  Batcher& batcher;
  Metrics& metrics;
  std::atomic<int64_t> predicts_in_flight{0};

  // OK, or UNAUTHENTICATED without the token.
  grpc::Status authorize(const grpc::CallbackServerContext* ctx) const {
    if (options.auth_token.empty()) return grpc::Status::OK;
    auto range = ctx->client_metadata().equal_range("authorization");
    for (auto it = range.first; it != range.second; ++it) {
      std::string_view v(it->second.data(), it->second.size());
      if (v.size() >= 7 && (v.substr(0, 7) == "Bearer " || v.substr(0, 7) == "bearer ") && same_token(v.substr(7), options.auth_token))
        return grpc::Status::OK;
    }
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "this server wants the metadata 'authorization: Bearer <token>'");
  }

  // The version a ModelSpec names, or the error to answer with.
  af::Result<std::shared_ptr<const LoadedModel>> find(const tfs::ModelSpec& spec) const {
    if (spec.name().empty()) return af::invalid_argument("model_spec.name is required");
    int64_t version = spec.has_version() ? spec.version().value() : 0;
    if (spec.has_version() && version <= 0)
      return af::invalid_argument("model_spec.version must be a positive version number, not " + std::to_string(version));
    return models.find(spec.name(), version, spec.version_label());
  }

  void finish(grpc::ServerUnaryReactor* reactor, const grpc::Status& s, const char* method, Clock::time_point start) const {
    metrics.record_grpc(method, static_cast<int>(s.error_code()), std::chrono::duration<double>(Clock::now() - start).count());
    reactor->Finish(s);
  }
};

class PredictionServiceImpl final : public tfs::PredictionService::CallbackService {
 public:
  explicit PredictionServiceImpl(Shared& sh) : sh_(sh) {}

  grpc::ServerUnaryReactor* Predict(grpc::CallbackServerContext* ctx, const tfs::PredictRequest* req, tfs::PredictResponse* resp) override {
    auto start = Clock::now();
    auto* reactor = ctx->DefaultReactor();
    auto fail = [&](const grpc::Status& s) {
      sh_.finish(reactor, s, "Predict", start);
      return reactor;
    };
    if (auto s = sh_.authorize(ctx); !s.ok()) return fail(s);
    auto m = sh_.find(req->model_spec());
    if (!m.ok()) return fail(to_grpc(m.status()));
    const LoadedModel& model = **m;
    const std::string& sig = req->model_spec().signature_name();
    if (!sig.empty() && sig != "serving_default")
      return fail(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                               "unknown signature_name '" + echo(sig) + "': model '" + model.model_name + "' has 'serving_default'"));
    auto in = req->inputs().find(model.input_name);
    if (req->inputs().size() != 1 || in == req->inputs().end()) {
      std::string got;
      for (auto& [k, v] : req->inputs()) got += (got.empty() ? "'" : ", '") + echo(k) + "'";
      return fail(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "model '" + model.model_name + "' takes one input, '" + model.input_name +
                                                                       "'; the request has " + (got.empty() ? "none" : got)));
    }
    for (auto& f : req->output_filter())
      if (f != model.output_name)
        return fail(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                 "output_filter names '" + echo(f) + "': model '" + model.model_name + "' has one output, '" + model.output_name + "'"));
    // Admission: one more call in flight than allowed is refused before its tensor is built.
    if (sh_.predicts_in_flight.fetch_add(1) >= sh_.options.max_in_flight_requests) {
      sh_.predicts_in_flight.fetch_sub(1);
      sh_.metrics.record_overload();
      return fail(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                               "too many Predict calls in flight (--max_in_flight_requests " +
                                   std::to_string(sh_.options.max_in_flight_requests) + "); try again later"));
    }
    auto x = tensor_from_proto(in->second, TensorSpec{model.input_name, model.input_dtype, model.input_shape},
                               sh_.options.max_message_bytes);
    if (!x.ok()) {
      sh_.predicts_in_flight.fetch_sub(1);
      return fail(to_grpc(x.status()));
    }
    sh_.metrics.add_grpc_in_flight(1);
    // The answer is written on whichever thread runs the step (a batch worker, or this
    // one without batching); gRPC sends it from its own threads.
    Shared* sh = &sh_;
    auto loaded = std::move(*m);
    sh_.batcher.submit(loaded, std::move(*x), [sh, reactor, resp, loaded, start](af::Result<af::Tensor> y) {
      sh->predicts_in_flight.fetch_sub(1);
      sh->metrics.add_grpc_in_flight(-1);
      if (!y.ok()) return sh->finish(reactor, to_grpc(y.status()), "Predict", start);
      fill_spec(*loaded, resp->mutable_model_spec(), true);
      auto s = tensor_to_proto(*y, &(*resp->mutable_outputs())[loaded->output_name]);
      sh->finish(reactor, to_grpc(s), "Predict", start);
    });
    return reactor;
  }

  grpc::ServerUnaryReactor* GetModelMetadata(grpc::CallbackServerContext* ctx, const tfs::GetModelMetadataRequest* req,
                                             tfs::GetModelMetadataResponse* resp) override {
    auto start = Clock::now();
    auto* reactor = ctx->DefaultReactor();
    sh_.finish(reactor, metadata(ctx, *req, resp), "GetModelMetadata", start);
    return reactor;
  }

 private:
  grpc::Status metadata(grpc::CallbackServerContext* ctx, const tfs::GetModelMetadataRequest& req, tfs::GetModelMetadataResponse* resp) {
    if (auto s = sh_.authorize(ctx); !s.ok()) return s;
    auto m = sh_.find(req.model_spec());
    if (!m.ok()) return to_grpc(m.status());
    if (req.metadata_field_size() == 0)
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "GetModelMetadataRequest must specify at least one metadata_field");
    for (auto& f : req.metadata_field())
      if (f != "signature_def")
        return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "metadata field '" + echo(f) + "' is not supported (this server has 'signature_def')");
    const LoadedModel& model = **m;
    tfs::SignatureDefMap sigs;
    tensorflow::SignatureDef& def = (*sigs.mutable_signature_def())["serving_default"];
    def.set_method_name("tensorflow/serving/predict");
    auto info = [](tensorflow::TensorInfo* t, const std::string& name, af::DType dtype, const af::Shape& shape) {
      t->set_name(name + ":0");
      t->set_dtype(tf_dtype(dtype));
      shape_to_proto(shape, t->mutable_tensor_shape());
    };
    info(&(*def.mutable_inputs())[model.input_name], model.input_name, model.input_dtype, model.input_shape);
    info(&(*def.mutable_outputs())[model.output_name], model.output_name, model.output_dtype, model.output_shape);
    fill_spec(model, resp->mutable_model_spec(), false);
    (*resp->mutable_metadata())["signature_def"].PackFrom(sigs);
    return grpc::Status::OK;
  }

  Shared& sh_;
};

class ModelServiceImpl final : public tfs::ModelService::CallbackService {
 public:
  explicit ModelServiceImpl(Shared& sh) : sh_(sh) {}

  grpc::ServerUnaryReactor* GetModelStatus(grpc::CallbackServerContext* ctx, const tfs::GetModelStatusRequest* req,
                                           tfs::GetModelStatusResponse* resp) override {
    auto start = Clock::now();
    auto* reactor = ctx->DefaultReactor();
    sh_.finish(reactor, status(ctx, *req, resp), "GetModelStatus", start);
    return reactor;
  }

 private:
  grpc::Status status(grpc::CallbackServerContext* ctx, const tfs::GetModelStatusRequest& req, tfs::GetModelStatusResponse* resp) {
    if (auto s = sh_.authorize(ctx); !s.ok()) return s;
    const auto& spec = req.model_spec();
    if (spec.name().empty()) return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "model_spec.name is required");
    ModelManager* model = sh_.models.find(spec.name());
    if (!model) return grpc::Status(grpc::StatusCode::NOT_FOUND, "Servable not found for request: no model named '" + echo(spec.name()) + "'");
    int64_t version = spec.has_version() ? spec.version().value() : 0;
    if (!spec.version_label().empty()) {
      auto l = model->options().labels.find(spec.version_label());
      if (l == model->options().labels.end())
        return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                            "model '" + model->name() + "' has no version label '" + echo(spec.version_label()) + "'");
      version = l->second;
    }
    for (auto& s : model->statuses()) {
      if (version && s.version != version) continue;
      auto* v = resp->add_model_version_status();
      v->set_version(s.version);
      v->set_state(tf_state(s.state));
      v->mutable_status()->set_error_code(tf_error_code(s.code));
      v->mutable_status()->set_error_message(s.error_message);
    }
    if (version && resp->model_version_status_size() == 0)
      return grpc::Status(grpc::StatusCode::NOT_FOUND, "version " + std::to_string(version) + " of model '" + model->name() + "' was never seen");
    if (resp->model_version_status_size() == 0)
      return grpc::Status(grpc::StatusCode::NOT_FOUND, "model '" + model->name() + "' has no version yet");
    return grpc::Status::OK;
  }

  Shared& sh_;
};

struct GrpcServer::Impl {
  Shared shared;
  Log log;
  // Before the services and the server, which use it until they are gone. It keeps as
  // many idle holders as --max_in_flight_requests lets calls in by default.
  ArenaMessagePool<tfs::PredictRequest, tfs::PredictResponse> predict_messages{128};
  PredictionServiceImpl prediction{shared};
  ModelServiceImpl model_service{shared};
  std::unique_ptr<grpc::Server> server;
  int port = 0;
  bool shut = false;
};

GrpcServer::GrpcServer(GrpcOptions options, ModelRegistry& models, Batcher& batcher, Metrics& metrics, Log log)
    : impl_(new Impl{Shared{std::move(options), models, batcher, metrics}, std::move(log)}) {}

GrpcServer::~GrpcServer() {
  if (impl_->server && !impl_->shut) shutdown(std::chrono::milliseconds(0));
}

af::Status GrpcServer::start() {
  // Debian's Abseil is built with its debug checks, so every absl::Mutex that gRPC makes
  // and destroys per call goes through the deadlock detector's graph (GetId, RemoveNode:
  // about 5% of the server's samples under a saturating gRPC load). gRPC's own release
  // builds run without it.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  const auto& o = impl_->shared.options;
  grpc::ServerBuilder builder;
  std::string host = o.host.find(':') != std::string::npos ? "[" + o.host + "]" : o.host;
  builder.AddListeningPort(host + ":" + std::to_string(o.port), grpc::InsecureServerCredentials(), &impl_->port);
  grpc::ResourceQuota quota("actorflow-serve");
  quota.Resize(static_cast<size_t>(o.max_in_flight_bytes));
  builder.SetResourceQuota(quota);
  builder.SetMaxReceiveMessageSize(o.max_message_bytes);
  builder.SetMaxSendMessageSize(o.max_message_bytes);
  impl_->prediction.SetMessageAllocatorFor_Predict(&impl_->predict_messages);
  builder.RegisterService(&impl_->prediction);
  builder.RegisterService(&impl_->model_service);
  impl_->server = builder.BuildAndStart();
  if (!impl_->server || impl_->port == 0)
    return af::Status(af::Code::unavailable, "gRPC cannot listen on " + host + ":" + std::to_string(o.port) + " (in use, or not an address of this host?)");
  return af::Status::OK();
}

int GrpcServer::port() const { return impl_->port; }

void GrpcServer::shutdown(std::chrono::milliseconds drain) {
  if (!impl_->server || impl_->shut) return;
  impl_->shut = true;
  impl_->server->Shutdown(std::chrono::system_clock::now() + drain);
  impl_->server->Wait();
}

}  // namespace serve
