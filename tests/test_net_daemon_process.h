// A node daemon (build/tools/actorflow-node) as a child process for the net tests: port 0
// with --port_file, the token in its environment, stderr to a log file. The destructor
// kills it (SIGKILL) and reaps it, so a failing test never leaves a daemon behind.
#pragma once
#include <doctest/doctest.h>

#include <signal.h>
#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace aftnet {

inline std::string daemon_binary() { return std::string(AF_SAMPLES_DIR) + "/../tools/actorflow-node"; }
inline bool daemon_built() { return ::access(daemon_binary().c_str(), X_OK) == 0; }

class DaemonProcess {
 public:
  // Starts the daemon and waits (up to 30 s) for its port file. `port` 0: any free port.
  DaemonProcess(const std::string& token, int port = 0, std::vector<std::string> extra = {}) {
    static int counter = 0;
    std::string base = "/tmp/af_net_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++);
    port_file_ = base + ".port";
    log_file_ = base + ".log";
    std::remove(port_file_.c_str());
    std::vector<std::string> args = {daemon_binary(), "--host", "127.0.0.1", "--port", std::to_string(port),
                                     "--port_file", port_file_};
    for (auto& e : extra) args.push_back(e);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    std::vector<std::string> env_strings;
    // Not the token, nor a launcher's variables (a test run under Slurm must not make the
    // daemon a task of that job): the test says who the daemon is.
    for (char** e = environ; *e; ++e) {
      std::string v = *e;
      bool skip = false;
      for (const char* prefix : {"ACTORFLOW_TOKEN", "TF_CONFIG=", "SLURM_", "OMPI_"})
        if (v.rfind(prefix, 0) == 0) skip = true;
      if (!skip) env_strings.push_back(v);
    }
    if (!token.empty()) env_strings.push_back("ACTORFLOW_TOKEN=" + token);
    std::vector<char*> envp;
    for (auto& e : env_strings) envp.push_back(e.data());
    envp.push_back(nullptr);
    // fork + exec rather than posix_spawn, so that the child can ask to die with this
    // process (PR_SET_PDEATHSIG): a test that aborts leaves no daemon behind. Only
    // async-signal-safe calls between fork and exec.
    pid_t parent = ::getpid();
    pid_ = ::fork();
    if (pid_ == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(127);
      int devnull = ::open("/dev/null", O_WRONLY);
      int log = ::open(log_file_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (devnull >= 0) ::dup2(devnull, 1);
      if (log >= 0) ::dup2(log, 2);
      ::execve(argv[0], argv.data(), envp.data());
      ::_exit(127);
    }
    if (pid_ < 0) {
      pid_ = -1;
      return;
    }
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < deadline) {
      std::ifstream in(port_file_);
      if (in >> port_ && port_ > 0) return;
      if (!running()) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  ~DaemonProcess() {
    kill9();
    std::remove(port_file_.c_str());
    std::remove(log_file_.c_str());
  }
  DaemonProcess(const DaemonProcess&) = delete;
  DaemonProcess& operator=(const DaemonProcess&) = delete;

  bool started() const { return pid_ > 0 && port_ > 0; }
  int port() const { return port_; }
  // The exit code once the process has ended by itself (-1 while it runs or if killed).
  int exit_code() {
    if (running()) return -1;
    return WIFEXITED(exit_status_) ? WEXITSTATUS(exit_status_) : -1;
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  std::string target() const { return "af://" + address(); }

  bool running() {
    if (pid_ <= 0) return false;
    int status = 0;
    pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      exit_status_ = status;
      pid_ = -1;
      return false;
    }
    return true;
  }
  void kill9() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    exit_status_ = status;
    pid_ = -1;
  }
  // SIGTERM, then the exit code (or -1 if it did not exit within `timeout`; then SIGKILL).
  int terminate(std::chrono::milliseconds timeout) {
    if (pid_ <= 0) return -1;
    ::kill(pid_, SIGTERM);
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      if (!running()) return WIFEXITED(exit_status_) ? WEXITSTATUS(exit_status_) : -1;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    kill9();
    return -1;
  }
  std::string log() const {
    std::ifstream in(log_file_);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

 private:
  pid_t pid_ = -1;
  int port_ = 0;
  int exit_status_ = 0;
  std::string port_file_;
  std::string log_file_;
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

}  // namespace aftnet
