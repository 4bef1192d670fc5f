// Running the real Python readers from a C++ test: a venv cached in the build folder
// (<build>/interop-venv, made by ensure_venv.sh on first use from the pinned
// requirements.txt) and a way to run a script and capture its output. When the venv
// cannot be made (no python3, no package index), the test skips through aft::skip
// (tests/interop/skip.h), which fails it instead under AF_REQUIRE_INTEROP=1.
#pragma once
#include <doctest/doctest.h>

#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

namespace interop {

namespace fs = std::filesystem;

// This directory (tests/interop), from the path the compiler was given.
inline fs::path script_dir() { return fs::path(__FILE__).parent_path(); }

// The build folder: the first ancestor of the test binary that holds CMakeCache.txt.
inline fs::path build_root() {
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  fs::path dir = ec ? fs::current_path() : exe.parent_path();
  for (fs::path d = dir; !d.empty(); d = d.parent_path()) {
    if (fs::exists(d / "CMakeCache.txt")) return d;
    if (d == d.parent_path()) break;
  }
  return dir;
}

inline std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// Runs a shell command, returning its exit status and its combined output.
inline int run(const std::string& cmd, std::string* output) {
  output->clear();
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return -1;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) output->append(buf.data(), n);
  int st = ::pclose(p);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

// The venv's python with `modules` (import names; the packages are the pinned
// requirements.txt) importable, or "" with `why` set when it cannot be had.
inline std::string python_with(const std::vector<std::string>& modules, std::string* why) {
  const char* override_dir = std::getenv("AF_INTEROP_VENV");
  fs::path venv = override_dir ? fs::path(override_dir) : build_root() / "interop-venv";
  std::string cmd = "bash " + shell_quote((script_dir() / "ensure_venv.sh").string()) + " " + shell_quote(venv.string());
  for (const std::string& m : modules) cmd += " " + shell_quote(m);
  std::string out;
  int rc = run(cmd, &out);
  if (rc != 0) {
    *why = "interop venv unavailable (exit " + std::to_string(rc) + "): " + out;
    return "";
  }
  return (venv / "bin" / "python").string();
}

// Runs tests/interop/<script> with `args`; returns its exit status.
inline int run_script(const std::string& python, const std::string& script, const std::vector<std::string>& args,
                      std::string* output) {
  std::string cmd = shell_quote(python) + " " + shell_quote((script_dir() / script).string());
  for (const std::string& a : args) cmd += " " + shell_quote(a);
  return run(cmd, output);
}

}  // namespace interop
