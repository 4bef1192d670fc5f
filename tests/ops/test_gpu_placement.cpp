// Soft placement (actorflow/ops/gpu_placement.h): which nodes run on a GPU, the one log
// line for each that falls back to the CPU, and the edges that then need copies. Pure
// graph logic: runs everywhere, pretending GPUs are present where a case says so.
#include <doctest/doctest.h>

#include <actorflow/ops/cuda_info.h>
#include <actorflow/ops/gpu_placement.h>

#include "test_util.h"

namespace af = actorflow;

namespace {

const af::DeviceId kCpu{af::DeviceType::CPU, 0};
const af::DeviceId kGpu0{af::DeviceType::GPU, 0};

bool has_line(const af::GpuPlacement& p, const std::string& node, const std::string& why) {
  for (const std::string& l : p.fallbacks)
    if (l.find("'" + node + "'") != std::string::npos && l.find(why) != std::string::npos) return true;
  return false;
}

// `g` placed as a process that sees one GPU would place it (no log lines).
af::GpuPlacement place_on_one_gpu(const af::Graph& g) {
  af::GpuPlacementOptions opts;
  opts.num_gpus = 1;
  opts.log = false;
  auto p = af::place_on_gpus(g, opts);
  REQUIRE_MESSAGE(p.ok(), p.status().to_string());
  return std::move(p).value();
}

af::DeviceId device_of(const af::GpuPlacement& p, const af::Output& o) { return p.devices[static_cast<size_t>(o.node_id())]; }

}  // namespace

TEST_CASE("soft placement: GPU nodes with float32 GPU kernels stay; the rest fall back with one line each") {
  af::Graph g;
  af::Output x, r, s, to_int, c, host;
  {
    af::DeviceScope gpu(g, "/gpu:0");
    x = af::placeholder(g, af::f32, {2, 3}, "x");
    r = af::relu(x, "r");
    s = af::softmax(r, "s");           // no GPU kernel yet
    to_int = af::cast(r, af::i64, "to_int");  // Cast to int64 has a GPU kernel
    c = af::neg(to_int, "c");          // int64: the GPU kernel is f32 only
  }
  host = af::square(r, "host");        // no device: the CPU
  auto p = place_on_one_gpu(g);
  auto dev = [&](const af::Output& o) { return device_of(p, o); };
  CHECK(dev(x) == kCpu);  // Placeholder has no GPU kernel: feeds arrive on the host
  CHECK(dev(s) == kCpu);
  CHECK(dev(c) == kCpu);
  CHECK(dev(host) == kCpu);
  CHECK(has_line(p, "x", "no GPU kernel for Placeholder"));
  CHECK(has_line(p, "s", "no GPU kernel for Softmax"));
  CHECK(has_line(p, "host", "") == false);  // never asked for a GPU: no line
  if (!af::built_with_cuda()) {
    CHECK(dev(r) == kCpu);
    CHECK(has_line(p, "r", "no GPU kernel for Relu"));
    CHECK(af::device_crossings(g, p).empty());
    return;
  }
  CHECK(dev(r) == kGpu0);
  CHECK(has_line(p, "c", "float32 only"));
  CHECK(dev(to_int) == kGpu0);
  // x -> r goes to the GPU; r comes back for s and host, to_int for c.
  auto crossings = af::device_crossings(g, p);
  REQUIRE(crossings.size() == 4);
  CHECK(crossings[0].from.node == x.node_id());
  CHECK(crossings[0].to_node == r.node_id());
  CHECK(std::string(crossings[0].copy_op) == "_CopyToDevice");
  for (size_t i = 1; i < crossings.size(); ++i) {
    const int back_from = crossings[i].to_node == c.node_id() ? to_int.node_id() : r.node_id();
    CHECK(crossings[i].from.node == back_from);
    CHECK(crossings[i].from_device == kGpu0);
    CHECK(crossings[i].to_device == kCpu);
    CHECK(std::string(crossings[i].copy_op) == "_CopyToHost");
  }
}

TEST_CASE("soft placement: a GPU the process does not have means the CPU, and says so") {
  af::Graph g;
  af::Output y;
  {
    af::DeviceScope gpu(g, "/job:localhost/task:0/device:GPU:2");
    auto x = af::placeholder(g, af::f32, {4}, "x");
    y = af::relu(x, "y");
  }
  auto p = place_on_one_gpu(g);
  CHECK(device_of(p, y) == kCpu);
  CHECK(has_line(p, "y", "there is no GPU 2 (this process sees 1)"));
  CHECK(p.fallbacks.size() == 2);
  CHECK(af::device_crossings(g, p).empty());
}

TEST_CASE("soft placement: a graph without GPU devices is all CPU and logs nothing") {
  af::Graph g;
  auto x = af::placeholder(g, af::f32, {4}, "x");
  auto y = af::relu(af::square(x));
  auto p = af::place_on_gpus(g);
  REQUIRE(p.ok());
  for (const af::DeviceId& d : p->devices) CHECK(d == kCpu);
  CHECK(p->fallbacks.empty());
  CHECK(y.valid());
}

TEST_CASE("soft placement: asking whether a GPU variable is initialized keeps it on the GPU") {
  af::Graph g;
  af::Output w, ready;
  {
    af::DeviceScope gpu(g, "/gpu:0");
    w = af::variable(g, af::zeros(g, {4}), "w");
    ready = af::is_variable_initialized(w, "w_ready");
  }
  af::Output report = af::report_uninitialized_variables(g);
  auto p = place_on_one_gpu(g);
  auto dev = [&](const af::Output& o) { return device_of(p, o); };
  // The question runs on the host (no GPU kernel, a host bool) and ties no variable there.
  CHECK(dev(ready) == kCpu);
  CHECK(dev(report) == kCpu);
  if (!af::built_with_cuda()) return;
  CHECK_MESSAGE(dev(w) == kGpu0, "w fell back:\n" << [&] {
    std::string all;
    for (auto& l : p.fallbacks) all += l + "\n";
    return all;
  }());
}
