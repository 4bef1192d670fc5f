// Skips that show. A test case that needs something from outside the build (a Python
// peer from PyPI, a Debian data package, a GPU) and cannot have it must not pass: it
// says why and ends its program with kSkipExitCode, which CTest reports as skipped
// (SKIP_RETURN_CODE, tests/CMakeLists.txt). Such cases are named "needs <what>: ..." and
// CTest runs each as an entry of its own, so ending the program hides no other case.
// Where the thing must be there (.ci/run sets AF_REQUIRE_INTEROP=1: CI installs the
// Debian packages and reaches PyPI), the case fails instead.
#pragma once
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>

namespace aft {

inline constexpr int kSkipExitCode = 77;

// `why` is printed as given. `require_env` names the variable that, set to 1, turns the
// skip into a failure.
inline void skip(const std::string& why, const char* require_env = "AF_REQUIRE_INTEROP") {
  const char* required = std::getenv(require_env);
  if (required && std::string(required) == "1") FAIL(why << " (" << std::string(require_env) << "=1: this test must run)");
  std::cout << why << std::endl;
  std::fflush(nullptr);
  // _Exit, not exit: the runtime's worker threads may still run, and static destructors
  // racing them would turn a skip into a crash.
  std::_Exit(kSkipExitCode);
}

}  // namespace aft
