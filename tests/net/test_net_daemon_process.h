// A node daemon (build/tools/actorflow-node) as a child process for the net tests: port 0
// with --port_file, the token in its environment, stderr to a log file. The destructor
// kills it (SIGKILL) and reaps it, so a failing test never leaves a daemon behind.
#pragma once
#include <doctest/doctest.h>

#include <unistd.h>

#include <actorflow/actorflow.h>

#include <chrono>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "child_process.h"

namespace aftnet {

inline std::string daemon_binary() { return std::string(AF_SAMPLES_DIR) + "/../tools/actorflow-node"; }
inline bool daemon_built() { return ::access(daemon_binary().c_str(), X_OK) == 0; }

class DaemonProcess : public aft::ChildProcess {
 public:
  // Starts the daemon and waits (up to 30 s) for its port file. `port` 0: any free port.
  // Its environment holds neither this process's token nor a launcher's variables (a test
  // run under Slurm must not make the daemon a task of that job): the test says who the
  // daemon is.
  DaemonProcess(const std::string& token, int port = 0, std::vector<std::string> extra = {})
      : aft::ChildProcess("af_net_test", args(port, std::move(extra)), env(token), false, std::chrono::seconds(30)) {}

  std::string address() const { return "127.0.0.1:" + std::to_string(port()); }
  std::string target() const { return "af://" + address(); }

 private:
  static std::vector<std::string> args(int port, std::vector<std::string> extra) {
    std::vector<std::string> a = {daemon_binary(), "--host", "127.0.0.1", "--port", std::to_string(port)};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  }
  static std::vector<std::string> env(const std::string& token) {
    auto e = aft::environment_without({"ACTORFLOW_TOKEN", "TF_CONFIG=", "SLURM_", "OMPI_"});
    if (!token.empty()) e.push_back("ACTORFLOW_TOKEN=" + token);
    return e;
  }
};

// Sets an environment variable for a scope.
struct ScopedEnv {
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old, had_ = true;
    setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (had_) setenv(name_, old_.c_str(), 1);
    else unsetenv(name_);
  }
  const char* name_;
  std::string old_;
  bool had_ = false;
};

// A client of the daemon at `target` whose one-node steps (y = 3x) must go on running
// while a test attacks that daemon.
class Bystander {
 public:
  explicit Bystander(const std::string& target) {
    x_ = actorflow::placeholder(g_, actorflow::f32, {-1}, "x");
    y_ = x_ * 3.0;
    auto s = actorflow::Session::create(g_, target);
    if (s.ok()) sess_.emplace(std::move(s).value());
    else error_ = s.status();
  }
  // OK when a step on `values` answers three times them.
  actorflow::Status step(std::vector<float> values) {
    if (!sess_) return error_;
    auto out = sess_->run({y_}, {{x_, actorflow::Tensor::from_vector<float>(values)}});
    if (!out.ok()) return out.status();
    for (float& v : values) v *= 3;
    if (!(*out)[0].equals(actorflow::Tensor::from_vector<float>(values)))
      return actorflow::internal_error("the step answered a wrong value");
    return actorflow::Status::OK();
  }

 private:
  actorflow::Graph g_;
  actorflow::Output x_, y_;
  std::optional<actorflow::Session> sess_;
  actorflow::Status error_;
};

// Three daemons started with the same flags, named as tasks worker 0, worker 1 and ps 0.
// The connections a client (not a peer daemon dialing for edges) made to a daemon, by
// its log's "authenticated" lines.
inline int client_connections(const std::string& log) {
  int n = 0;
  size_t at = 0;
  while ((at = log.find("authenticated", at)) != std::string::npos) {
    size_t line = log.rfind('\n', at);
    line = line == std::string::npos ? 0 : line + 1;
    if (log.substr(line, at - line).find("(peer daemon '") == std::string::npos) ++n;
    ++at;
  }
  return n;
}

struct ThreeDaemons {
  explicit ThreeDaemons(const std::string& token, std::vector<std::string> extra = {})
      : d0(token, 0, extra), d1(token, 0, extra), d2(token, 0, extra) {}
  DaemonProcess d0, d1, d2;
  bool started() { return d0.started() && d1.started() && d2.started(); }
  std::string logs() { return d0.log() + d1.log() + d2.log(); }
  std::string target() {
    return "/job:worker/task:0=" + d0.target() + ",/job:worker/task:1=" + d1.target() + ",/job:ps/task:0=" + d2.target();
  }
};

}  // namespace aftnet
