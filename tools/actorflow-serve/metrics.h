// The server's counters, rendered in Prometheus's text exposition format (version 0.0.4)
// at GET /metrics: requests by status code, a latency histogram, the rows of each
// session step (the batch sizes), the steps themselves, the version loaded, and what
// admission control refused (429s by reason, the batch queue's high-water mark).
#pragma once
#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace serve {

class Metrics {
 public:
  void record_request(int status, double seconds);
  // One gRPC call answered with gRPC status `code`.
  void record_grpc(const std::string& method, int code, double seconds);
  // One session step that predicted `rows` rows for `requests` requests.
  void record_step(int64_t rows, int64_t requests);
  // A request refused with 429: the batch queue was full, or too many requests (or
  // bytes) were in flight.
  void record_queue_full() { queue_full_.fetch_add(1); }
  void record_overload() { overloaded_.fetch_add(1); }
  // gRPC Predict calls admitted and not yet answered.
  void add_grpc_in_flight(int64_t d) { grpc_in_flight_.fetch_add(d); }
  // The batch queue now holds `rows` rows.
  void record_queue_rows(int64_t rows) {
    for (int64_t peak = queue_peak_rows_.load(); rows > peak && !queue_peak_rows_.compare_exchange_weak(peak, rows);) {
    }
  }
  // Each model served with its newest version loaded (0 while none is).
  std::string render(const std::vector<std::pair<std::string, int64_t>>& models) const;

  int64_t steps() const { return steps_.load(); }

 private:
  static constexpr std::array<double, 12> kLatencyBounds{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                                         0.05,   0.1,   0.25,   0.5,   1.0,  2.5};
  static constexpr std::array<double, 9> kBatchBounds{1, 2, 4, 8, 16, 32, 64, 128, 256};

  template <size_t N>
  struct Histogram {
    std::array<uint64_t, N> buckets{};  // counts per bound, not yet cumulative
    uint64_t count = 0;
    double sum = 0;
    void observe(const std::array<double, N>& bounds, double v);
    void render(std::string& out, const std::string& name, const std::array<double, N>& bounds) const;
  };

  mutable std::mutex mu_;
  std::map<int, uint64_t> by_code_;
  std::map<std::pair<std::string, int>, uint64_t> grpc_by_code_;
  Histogram<kLatencyBounds.size()> latency_;
  Histogram<kBatchBounds.size()> batch_rows_;
  std::atomic<int64_t> steps_{0};
  std::atomic<int64_t> queue_full_{0}, overloaded_{0}, queue_peak_rows_{0}, grpc_in_flight_{0};
  uint64_t batched_requests_ = 0;
};

}  // namespace serve
