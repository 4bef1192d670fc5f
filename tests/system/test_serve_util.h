// What the serving tests share: the cancer sample trained and exported as a version,
// its `--mode inference` answers, actorflow-serve as a child process (killed and reaped
// by the destructor, so a failing test never leaves a server behind) and an HTTP client
// on Boost.Beast whose every call has a deadline.
#pragma once
#include <doctest/doctest.h>

#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/prctl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange without it

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "child_process.h"
#include "interop/skip.h"
#include "loopback_socket.h"
#include "kit/trainer.h"

extern char** environ;

namespace afserve {

namespace fs = std::filesystem;
using json = nlohmann::json;

inline std::string tools_dir() { return std::string(AF_SAMPLES_DIR) + "/../tools"; }
inline std::string serve_binary() { return tools_dir() + "/actorflow-serve"; }
inline std::string sample_binary() { return std::string(AF_SAMPLES_DIR) + "/cancer_classifier"; }

// Skips (exit 77) when the data, the sample or the server is missing.
inline void need_serving() {
  if (!fs::exists(kit::kBreastCancerCsv))
    aft::skip(std::string("serving test skipped: python3-sklearn is not installed (") + kit::kBreastCancerCsv + ")");
  if (::access(serve_binary().c_str(), X_OK) != 0)
    aft::skip("serving test skipped: " + serve_binary() + " is not built (libboost-dev missing?)");
}

// A fresh folder under /tmp, removed at the end of the scope.
struct TempDir {
  fs::path path;
  explicit TempDir(const std::string& tag) {
    static int counter = 0;
    path = fs::temp_directory_path() / ("af_serve_" + tag + "_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

// Runs the cancer sample with `args`; returns its exit code, its output in *out.
inline int run_sample(const std::string& args, std::string* out = nullptr) {
  std::string cmd = sample_binary() + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return -1;
  std::string text;
  char buf[4096];
  while (fgets(buf, sizeof buf, p)) text += buf;
  int rc = pclose(p);
  if (out) *out = text;
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

// Trains a small dnn (`seed` makes versions differ) and exports it as `version` under `base`.
inline void train_and_export(const fs::path& work, const fs::path& base, int version, int seed, int epochs = 2) {
  std::string common = " --model dnn --model_network \"16 8\" --seed " + std::to_string(seed) + " --checkpoint_path " +
                       (work / ("ckpt" + std::to_string(version))).string() + " --output_path " + (work / "tb").string() +
                       " --saved_model_path " + base.string() + " --model_version " + std::to_string(version);
  std::string out;
  int rc = run_sample("--mode train_from_scratch --epoch_number " + std::to_string(epochs) + common, &out);
  REQUIRE_MESSAGE(rc == 0, "training failed: " << out);
  rc = run_sample("--mode export" + common, &out);
  REQUIRE_MESSAGE(rc == 0, "export failed: " << out);
  REQUIRE(fs::exists(base / std::to_string(version) / "signature.txt"));
}

// `--mode inference` over the whole breast-cancer CSV: one probability per row.
inline std::vector<double> inference_output(const fs::path& work, const fs::path& base, int version) {
  fs::path result = work / ("inference" + std::to_string(version) + ".txt");
  std::string out;
  int rc = run_sample("--mode inference --model dnn --saved_model_path " + base.string() + " --model_version " +
                          std::to_string(version) + " --inference_test_file " + kit::kBreastCancerCsv +
                          " --inference_result_file " + result.string(),
                      &out);
  REQUIRE_MESSAGE(rc == 0, "inference failed: " << out);
  std::ifstream in(result);
  std::vector<double> v;
  for (double x; in >> x;) v.push_back(x);
  return v;
}

// The CSV's feature rows, as the server's clients send them.
inline std::vector<std::vector<float>> feature_rows() {
  auto x = kit::load_inference_inputs(kit::kBreastCancerCsv, "csv", 30);
  REQUIRE_MESSAGE(x.ok(), x.status().to_string());
  std::vector<std::vector<float>> rows;
  for (int64_t r = 0; r < x->dim(0); ++r) rows.emplace_back(x->data<float>() + r * 30, x->data<float>() + (r + 1) * 30);
  return rows;
}

inline std::string instances_body(const std::vector<std::vector<float>>& rows, size_t begin, size_t end) {
  json inst = json::array();
  for (size_t i = begin; i < end; ++i) inst.push_back(rows[i]);
  return json{{"instances", inst}}.dump();
}

class ServeProcess : public aft::ChildProcess {
 public:
  // Starts the server on a free port and waits (up to 60 s) for its port file.
  explicit ServeProcess(std::vector<std::string> args)
      : aft::ChildProcess("af_serve_proc", with_binary(std::move(args)), aft::environment_without({}), true,
                          std::chrono::seconds(60)) {}

 private:
  static std::vector<std::string> with_binary(std::vector<std::string> args) {
    // REST on a free port (its port file is the one ChildProcess waits for), gRPC too.
    std::vector<std::string> all = {serve_binary(), "--host", "127.0.0.1", "--rest_api_port", "0", "--port", "0"};
    all.insert(all.end(), args.begin(), args.end());
    return all;
  }
};

struct Reply {
  int status = 0;  // 0: no answer (error says why)
  std::string body;
  std::string error;
  json doc() const { return json::parse(body, nullptr, false); }
};

// One request on a new connection to 127.0.0.1:port; every step shares one deadline.
inline Reply http_call(int port, const std::string& method, const std::string& target, const std::string& body = "",
                       const std::vector<std::pair<std::string, std::string>>& headers = {}, int timeout_ms = 30000) {
  namespace beast = boost::beast;
  namespace http = beast::http;
  namespace net = boost::asio;
  net::io_context ioc;
  beast::tcp_stream stream(ioc);
  stream.expires_after(std::chrono::milliseconds(timeout_ms));
  beast::error_code ec;
  Reply r;
  auto step = [&](auto&& start) {
    ioc.restart();
    start([&](beast::error_code e, auto&&...) { ec = e; });
    ioc.run();
    return !ec;
  };
  net::ip::tcp::endpoint ep(net::ip::make_address("127.0.0.1"), static_cast<uint16_t>(port));
  if (!step([&](auto h) { stream.async_connect(ep, h); })) return Reply{0, "", "connect: " + ec.message()};
  http::request<http::string_body> req{http::string_to_verb(method), target, 11};
  req.set(http::field::host, "127.0.0.1");
  if (!body.empty()) req.set(http::field::content_type, "application/json");
  for (auto& [k, v] : headers) req.set(k, v);
  req.body() = body;
  req.prepare_payload();
  if (!step([&](auto h) { http::async_write(stream, req, h); })) return Reply{0, "", "write: " + ec.message()};
  beast::flat_buffer buf;
  http::response_parser<http::string_body> parser;
  parser.body_limit(64u << 20);
  if (!step([&](auto h) { http::async_read(stream, buf, parser, h); })) return Reply{0, "", "read: " + ec.message()};
  r.status = static_cast<int>(parser.get().result_int());
  r.body = parser.get().body();
  return r;
}

// A plain socket with 5 s send and receive timeouts, connected to 127.0.0.1:port; -1 on failure.
inline int connect_raw(int port) { return aft::connect_loopback(port, 5); }

// Everything the server sends until it closes (or 5 s pass without a byte).
inline std::string read_all(int fd) {
  std::string out;
  char buf[4096];
  for (int i = 0; i < 100000; ++i) {
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

// Sends raw bytes on a new connection; the status of the answer, 0 if none came.
inline int raw_status(int port, const std::string& bytes) {
  int fd = connect_raw(port);
  if (fd < 0) return 0;
  (void)::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
  std::string answer = read_all(fd);
  ::close(fd);
  if (answer.rfind("HTTP/1.", 0) != 0 || answer.size() < 12) return 0;
  return std::stoi(answer.substr(9, 3));
}

// The "predictions" of a predict answer, as numbers (rows of one value each).
inline std::vector<double> predictions(const Reply& r, const char* key = "predictions") {
  std::vector<double> v;
  auto doc = r.doc();
  if (!doc.is_object() || !doc.contains(key) || !doc[key].is_array()) return v;
  for (auto& x : doc[key]) v.push_back(x.get<double>());
  return v;
}

// A /proc/<pid>/status field in kB (VmRSS, VmHWM), or 0.
inline long proc_status_kb(pid_t pid, const std::string& field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string key;
  long kb = 0;
  while (in >> key)
    if (key == field + ":" && in >> kb) return kb;
  return 0;
}

// Resets the process's peak RSS (VmHWM) to its RSS now, so that VmHWM then tells the most
// a stretch of requests took; false where the kernel does not let us.
inline bool reset_peak_rss(pid_t pid) {
  std::ofstream out("/proc/" + std::to_string(pid) + "/clear_refs");
  out << "5";
  out.flush();
  return static_cast<bool>(out);
}

// `name`'s value in Prometheus text (the first line starting with it), or -1.
inline double metric(const std::string& text, const std::string& name) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (line.rfind(name + " ", 0) == 0) return std::stod(line.substr(name.size() + 1));
  return -1;
}

}  // namespace afserve
