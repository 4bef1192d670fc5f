// A program a test runs as a child process on loopback (a daemon, a server): started on
// a free port (port 0 and --port_file), its output in a log file, killed and reaped by
// the destructor, and asked to die with the test (PR_SET_PDEATHSIG) so that a test that
// aborts leaves nothing running, nor the build lock or files it inherited.
#pragma once
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <initializer_list>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace aft {

// This process's environment without the variables that start with one of `drop`.
inline std::vector<std::string> environment_without(std::initializer_list<const char*> drop) {
  std::vector<std::string> out;
  for (char** e = environ; *e; ++e) {
    std::string v = *e;
    bool skip = false;
    for (const char* prefix : drop) skip = skip || v.rfind(prefix, 0) == 0;
    if (!skip) out.push_back(v);
  }
  return out;
}

class ChildProcess {
 public:
  // Runs args[0] with args and "--port_file <file>" appended, in `env`; waits up to
  // `wait` for the port file. stdout goes to the log with stderr, or to /dev/null.
  ChildProcess(const std::string& stem, std::vector<std::string> args, std::vector<std::string> env,
               bool stdout_to_log, std::chrono::seconds wait) {
    static int counter = 0;
    std::string base = "/tmp/" + stem + "_" + std::to_string(::getpid()) + "_" + std::to_string(counter++);
    port_file_ = base + ".port";
    log_file_ = base + ".log";
    std::remove(port_file_.c_str());
    args.push_back("--port_file");
    args.push_back(port_file_);
    std::vector<char*> argv, envp;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    for (auto& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    int log = ::open(log_file_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    int devnull = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
    // fork + exec rather than posix_spawn, so the child can ask to die with this process.
    // Only async-signal-safe calls between fork and exec.
    pid_t parent = ::getpid();
    pid_ = ::fork();
    if (pid_ == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(127);
      if (log >= 0) ::dup2(log, 2);
      if (stdout_to_log && log >= 0) ::dup2(log, 1);
      else if (devnull >= 0) ::dup2(devnull, 1);
      ::execve(argv[0], argv.data(), envp.data());
      ::_exit(127);
    }
    if (log >= 0) ::close(log);
    if (devnull >= 0) ::close(devnull);
    if (pid_ < 0) {
      pid_ = -1;
      return;
    }
    auto deadline = std::chrono::steady_clock::now() + wait;
    while (std::chrono::steady_clock::now() < deadline && running()) {
      std::ifstream in(port_file_);
      if (in >> port_ && port_ > 0) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  ~ChildProcess() {
    kill9();
    std::remove(port_file_.c_str());
    std::remove(log_file_.c_str());
  }
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  bool started() const { return pid_ > 0 && port_ > 0; }
  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  bool running() {
    if (pid_ <= 0) return false;
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      exit_status_ = status;
      pid_ = -1;
      return false;
    }
    return true;
  }
  // The exit code once the process has ended by itself (-1 while it runs or if killed).
  int exit_code() {
    if (running()) return -1;
    return WIFEXITED(exit_status_) ? WEXITSTATUS(exit_status_) : -1;
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
  // Resident memory in kB, from /proc; 0 when it cannot be read.
  long rss_kb() const {
    std::ifstream in("/proc/" + std::to_string(pid_) + "/status");
    std::string key;
    long kb = 0;
    while (in >> key)
      if (key == "VmRSS:" && in >> kb) return kb;
    return 0;
  }

 private:
  pid_t pid_ = -1;
  int port_ = 0;
  int exit_status_ = 0;
  std::string port_file_;
  std::string log_file_;
};

}  // namespace aft
