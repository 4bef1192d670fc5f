// What the checkpoint tests share (test_saver.cpp, test_safetensors_format.cpp): temp
// folders, a small model and its values, file helpers, a guard for forked children.
#pragma once
#include <doctest/doctest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "../../engine/src/io/safetensors.h"
#include "interop/interop.h"
#include "interop/skip.h"
#include "test_util.h"

namespace af = actorflow;
namespace fs = std::filesystem;

namespace {

inline bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

struct TempDir {
  fs::path path;
  TempDir() {
    static std::atomic<int> counter{0};
    path = fs::temp_directory_path() / ("af_saver_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string str() const { return path.string(); }
  std::string operator/(const std::string& name) const { return (path / name).string(); }
};

inline af::Tensor eval_var(af::Session& sess, const af::Output& v) {
  auto r = sess.eval(v);
  if (!r.ok()) FAIL(r.status().to_string());
  return *r;
}

inline void set_var(af::Session& sess, const af::Output& var, const af::Tensor& value) {
  af::Graph& g = *var.graph();
  auto ph = af::placeholder(g, value.dtype(), value.shape());
  auto op = af::assign(var, ph);
  REQUIRE(sess.run({}, {{ph, value}}, {af::Operation(op)}).ok());
}

inline std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

inline void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << bytes;
}

inline uint64_t header_len(const std::string& file) {
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = n << 8 | static_cast<unsigned char>(file[static_cast<size_t>(i)]);
  return n;
}

// A model with one variable of each dtype, some scalar or empty, plus a non-trainable
// global_step, as a training graph has.
struct Model {
  af::Graph g;
  af::Output w, d, i32v, i64v, u8v, flags, empty, step;
  Model() {
    w = af::variable(g, af::random_normal(g, {2, 3}, 0, 1, 7), "dense/kernel");
    d = af::variable(g, {}, af::constant_initializer(0.5, af::f64), "scale");
    i32v = af::variable(g, af::zeros(g, {4}, af::i32), "ids");
    i64v = af::variable(g, af::ones(g, {2, 2}, af::i64), "counts");
    u8v = af::variable(g, af::zeros(g, {5}, af::u8), "pixels");
    flags = af::variable(g, af::zeros(g, {3}, af::boolean), "flags");
    empty = af::variable(g, af::zeros(g, {0, 3}), "empty");
    step = af::variable(g, af::zeros(g, {}, af::i64), "global_step", /*trainable=*/false);
  }
};

// The values the tests store, different from every initializer.
struct Values {
  af::Tensor w = af::Tensor::from_vector<float>({1.5f, -2.25f, 3e-8f, 4e8f, -0.f, 6.f}, {2, 3});
  af::Tensor d = af::Tensor::scalar<double>(-1.0 / 3.0);
  af::Tensor i32v = af::Tensor::from_vector<int32_t>({1, -2, 2147483647, -2147483647 - 1});
  af::Tensor i64v = af::Tensor::from_vector<int64_t>({int64_t{1} << 50, -3, 0, 99}, {2, 2});
  af::Tensor u8v = af::Tensor::from_vector<uint8_t>({0, 1, 128, 254, 255});
  af::Tensor flags = af::Tensor::from_vector<bool>({true, false, true});
  af::Tensor step = af::Tensor::scalar<int64_t>(1234);
};

inline void store(af::Session& sess, Model& m, const Values& v) {
  set_var(sess, m.w, v.w);
  set_var(sess, m.d, v.d);
  set_var(sess, m.i32v, v.i32v);
  set_var(sess, m.i64v, v.i64v);
  set_var(sess, m.u8v, v.u8v);
  set_var(sess, m.flags, v.flags);
  set_var(sess, m.step, v.step);
}

inline void check_values(af::Session& sess, Model& m, const Values& v) {
  CHECK(eval_var(sess, m.w).equals(v.w));
  CHECK(eval_var(sess, m.d).equals(v.d));
  CHECK(eval_var(sess, m.i32v).equals(v.i32v));
  CHECK(eval_var(sess, m.i64v).equals(v.i64v));
  CHECK(eval_var(sess, m.u8v).equals(v.u8v));
  CHECK(eval_var(sess, m.flags).equals(v.flags));
  CHECK(eval_var(sess, m.empty).shape() == af::Shape{0, 3});
  CHECK(eval_var(sess, m.step).equals(v.step));
}

// Saves a Model holding Values at `step` into `dir`; returns the file.
inline std::string save_model(const std::string& dir, int64_t step, int max_to_keep = 5) {
  Model m;
  af::Saver saver(m.g, {}, max_to_keep);
  auto sess = af::Session::create(m.g).value();
  REQUIRE(sess.run_init().ok());
  store(sess, m, Values{});
  std::string path;
  auto s = saver.save(sess, dir, step, &path);
  REQUIRE_MESSAGE(s.ok(), s.to_string());
  return path;
}

// Kills and reaps a forked child when a failed REQUIRE leaves the test early.
struct ChildGuard {
  pid_t pid;
  ~ChildGuard() {
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  }
};

}  // namespace
