#include "tracer.h"

#include <atomic>
#include <cstdio>
#include <fstream>
#include <map>

namespace actorflow::runtime {

uint64_t trace_thread_id() {
  static std::atomic<uint64_t> next{1};
  thread_local uint64_t id = next++;
  return id;
}

void Tracer::record(TraceEvent e) {
  std::lock_guard<std::mutex> lock(mu_);
  events_.push_back(std::move(e));
}

std::vector<TraceEvent> Tracer::events() const {
  std::lock_guard<std::mutex> lock(mu_);
  return events_;
}

namespace {
std::string json_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') { o += '\\'; o += c; }
    else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      o += buf;
    } else o += c;
  }
  return o;
}
}  // namespace

std::string Tracer::to_chrome_json() const {
  auto evs = events();
  std::map<std::string, int> pids;
  std::string out = "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n";
  bool first = true;
  for (auto& e : evs) {
    auto [it, fresh] = pids.emplace(e.device, static_cast<int>(pids.size()) + 1);
    if (fresh) {
      out += std::string(first ? "" : ",\n") + "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":" +
             std::to_string(it->second) + ",\"args\":{\"name\":\"" + json_escape(e.device) + "\"}}";
      first = false;
    }
    char buf[128];
    std::snprintf(buf, sizeof buf, "\"ts\":%.3f,\"dur\":%.3f", static_cast<double>(e.start_ns) / 1000.0,
                  static_cast<double>(e.end_ns - e.start_ns) / 1000.0);
    out += std::string(first ? "" : ",\n") + "{\"name\":\"" + json_escape(e.node) + "\",\"cat\":\"" + json_escape(e.op) +
           "\",\"ph\":\"X\"," + buf + ",\"pid\":" + std::to_string(it->second) + ",\"tid\":" + std::to_string(e.thread) +
           ",\"args\":{\"step\":" + std::to_string(e.step) + ",\"op\":\"" + json_escape(e.op) + "\"}}";
    first = false;
  }
  out += "\n]}\n";
  return out;
}

Status Tracer::write(const std::string& path) const {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) return Status(Code::unavailable, "cannot open trace file '" + path + "' for writing");
  f << to_chrome_json();
  f.close();
  if (!f) return data_loss("failed writing trace file '" + path + "'");
  return Status::OK();
}

}  // namespace actorflow::runtime
