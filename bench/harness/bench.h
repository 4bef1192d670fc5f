// A small harness for the benchmark programs. A program registers cases; each case,
// when prepared, yields "sides": ours first, then the in-process peers (libtorch,
// memcpy, ...). Every side's sample() runs the same block of work (params.reps
// operations) and returns one value in the case's unit. The harness alternates
// ours/peer (A B A B ...) after a warm-up and reports medians, so drift from other
// load on the machine hits both sides alike.
//
// A program runs standalone (`prog [--quick] [CASE...]`, in-process peers only) or as
// a worker of bench/python/driver.py (`prog --serve`), which also alternates ours with
// the Python peers (PyTorch, TensorFlow) over a line protocol; see bench/README.md.
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace bench {

using Clock = std::chrono::steady_clock;
inline double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Case parameters, shared with the Python peers (sent as JSON), so every side does
// the same work. Integers or strings only.
struct Params {
  std::map<std::string, int64_t> ints;
  std::map<std::string, std::string> strs;
  int64_t at(const std::string& k) const { return ints.at(k); }
};

struct Side {
  std::string name;     // "ours", "libtorch", "memcpy", ...
  std::string threads;  // the thread settings this side runs with, in words
  std::function<double()> sample;
};

struct Prepared {
  std::vector<Side> sides;  // sides[0] is ours
};

struct Case {
  std::string name;
  std::string unit;            // "us", "ms", "GFLOP/s", "GB/s"
  bool higher_is_better = false;
  std::string work;            // what one operation is, in words
  // Parameters; `quick` may lower reps (never the shapes).
  std::function<Params(bool quick)> params;
  // Builds the graphs and tensors of every side and warms nothing up (the harness does).
  std::function<Prepared(const Params&)> prepare;
  bool skip_in_quick = false;
  std::string note;            // printed with the case, e.g. a target figure
  // Ours against ours (another way of running the same session): an internal ratio,
  // reported apart from the peer comparisons; no Python peer is asked.
  bool internal = false;
};

// Registers a case at static-initialization time: `static int x = bench::add(...)`.
int add(Case c);

// Parses the command line and runs the registered cases (see the file comment).
int main(int argc, char** argv);

// Threads every side of a case gets (intra-op pools, BLAS, memcpy): $BENCH_THREADS,
// default 2 (this machine's cores).
int threads();

// Throws std::runtime_error when `ok` is false: a wrong result means the timing is void.
void check(bool ok, const std::string& what);

// The value of an ActorFlow Result (or any type with ok(), status().to_string() and *),
// or an exception naming `what` and the error.
template <class R>
const auto& must(const R& r, const std::string& what) {
  if (!r.ok()) throw std::runtime_error(what + ": " + r.status().to_string());
  return *r;
}

// Peak FP32 FLOP/s of this machine: cores x 32 FLOP/cycle (2 FMA pipes x 8 lanes x 2)
// x the clock in /proc/cpuinfo. 0 when unknown.
double peak_gflops(double* ghz = nullptr, int* cores = nullptr);

}  // namespace bench

#define BENCH_CONCAT2(a, b) a##b
#define BENCH_CONCAT(a, b) BENCH_CONCAT2(a, b)
// BENCH_CASE(bench::Case{...}); at namespace scope.
#define BENCH_CASE(...) static const int BENCH_CONCAT(bench_case_, __LINE__) = ::bench::add(__VA_ARGS__)
