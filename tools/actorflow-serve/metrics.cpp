#include "metrics.h"

#include <cstdio>

namespace serve {

namespace {
std::string num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}
}  // namespace

template <size_t N>
void Metrics::Histogram<N>::observe(const std::array<double, N>& bounds, double v) {
  for (size_t i = 0; i < N; ++i)
    if (v <= bounds[i]) {
      ++buckets[i];
      break;
    }
  ++count;
  sum += v;
}

template <size_t N>
void Metrics::Histogram<N>::render(std::string& out, const std::string& name, const std::array<double, N>& bounds) const {
  uint64_t cumulative = 0;
  for (size_t i = 0; i < N; ++i) {
    cumulative += buckets[i];
    out += name + "_bucket{le=\"" + num(bounds[i]) + "\"} " + std::to_string(cumulative) + "\n";
  }
  out += name + "_bucket{le=\"+Inf\"} " + std::to_string(count) + "\n";
  out += name + "_sum " + num(sum) + "\n";
  out += name + "_count " + std::to_string(count) + "\n";
}

void Metrics::record_request(int status, double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  ++by_code_[status];
  latency_.observe(kLatencyBounds, seconds);
}

void Metrics::record_grpc(const std::string& method, int code, double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  ++grpc_by_code_[{method, code}];
  latency_.observe(kLatencyBounds, seconds);
}

void Metrics::record_step(int64_t rows, int64_t requests) {
  steps_.fetch_add(1);
  std::lock_guard<std::mutex> lock(mu_);
  batch_rows_.observe(kBatchBounds, static_cast<double>(rows));
  batched_requests_ += static_cast<uint64_t>(requests);
}

std::string Metrics::render(const std::vector<std::pair<std::string, int64_t>>& models) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string out;
  out += "# HELP actorflow_serve_requests_total HTTP requests answered, by status code.\n";
  out += "# TYPE actorflow_serve_requests_total counter\n";
  for (auto& [code, n] : by_code_)
    out += "actorflow_serve_requests_total{code=\"" + std::to_string(code) + "\"} " + std::to_string(n) + "\n";
  out += "# HELP actorflow_serve_grpc_requests_total gRPC calls answered, by method and gRPC status code (0: OK).\n";
  out += "# TYPE actorflow_serve_grpc_requests_total counter\n";
  for (auto& [key, n] : grpc_by_code_)
    out += "actorflow_serve_grpc_requests_total{method=\"" + key.first + "\",code=\"" + std::to_string(key.second) + "\"} " +
           std::to_string(n) + "\n";
  out += "# HELP actorflow_serve_grpc_predicts_in_flight gRPC Predict calls admitted and not yet answered.\n";
  out += "# TYPE actorflow_serve_grpc_predicts_in_flight gauge\n";
  out += "actorflow_serve_grpc_predicts_in_flight " + std::to_string(grpc_in_flight_.load()) + "\n";
  out += "# HELP actorflow_serve_request_duration_seconds Time from a whole request read to its answer ready to write (HTTP and gRPC).\n";
  out += "# TYPE actorflow_serve_request_duration_seconds histogram\n";
  latency_.render(out, "actorflow_serve_request_duration_seconds", kLatencyBounds);
  out += "# HELP actorflow_serve_batch_size Rows predicted by one session step (requests merged by batching).\n";
  out += "# TYPE actorflow_serve_batch_size histogram\n";
  batch_rows_.render(out, "actorflow_serve_batch_size", kBatchBounds);
  out += "# HELP actorflow_serve_session_steps_total Predict steps run on the model; fewer than requests when batching merges them.\n";
  out += "# TYPE actorflow_serve_session_steps_total counter\n";
  out += "actorflow_serve_session_steps_total " + std::to_string(steps_.load()) + "\n";
  out += "# HELP actorflow_serve_predict_requests_total Predict requests those steps answered.\n";
  out += "# TYPE actorflow_serve_predict_requests_total counter\n";
  out += "actorflow_serve_predict_requests_total " + std::to_string(batched_requests_) + "\n";
  out += "# HELP actorflow_serve_rejected_requests_total Requests refused with 429 before their step, by reason.\n";
  out += "# TYPE actorflow_serve_rejected_requests_total counter\n";
  out += "actorflow_serve_rejected_requests_total{reason=\"batch_queue_full\"} " + std::to_string(queue_full_.load()) + "\n";
  out += "actorflow_serve_rejected_requests_total{reason=\"in_flight\"} " + std::to_string(overloaded_.load()) + "\n";
  out += "# HELP actorflow_serve_batch_queue_peak_rows The most rows the batch queue has held at once.\n";
  out += "# TYPE actorflow_serve_batch_queue_peak_rows gauge\n";
  out += "actorflow_serve_batch_queue_peak_rows " + std::to_string(queue_peak_rows_.load()) + "\n";
  out += "# HELP actorflow_serve_model_version The newest version of each model loaded; 0 while none is.\n";
  out += "# TYPE actorflow_serve_model_version gauge\n";
  for (auto& [name, version] : models)
    out += "actorflow_serve_model_version{model=\"" + name + "\"} " + std::to_string(version) + "\n";
  return out;
}

}  // namespace serve
