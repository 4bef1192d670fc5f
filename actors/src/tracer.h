// A timeline of kernel executions, written as Chrome trace JSON (opens in Perfetto).
#pragma once
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "actorflow/status.h"

namespace actorflow::runtime {

struct TraceEvent {
  std::string node;
  std::string op;
  std::string device;
  int64_t step = 0;
  uint64_t thread = 0;
  int64_t start_ns = 0;  // since the tracer's origin
  int64_t end_ns = 0;
};

class Tracer {
 public:
  Tracer() : origin_(std::chrono::steady_clock::now()) {}
  int64_t now_ns() const {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - origin_).count();
  }
  void record(TraceEvent e);
  std::vector<TraceEvent> events() const;
  std::string to_chrome_json() const;
  Status write(const std::string& path) const;

 private:
  std::chrono::steady_clock::time_point origin_;
  mutable std::mutex mu_;
  std::vector<TraceEvent> events_;
};

// A small integer naming the calling thread in traces.
uint64_t trace_thread_id();

}  // namespace actorflow::runtime
