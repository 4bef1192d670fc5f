// The runtime's GPU placement (actors/src/gpu_plan.h), checked where no GPU is: the plan
// of an MLP training step built under /gpu:0 is placed as if one GPU were present (the
// registry lists the CUDA module's kernels in every CUDA build), and the copies, feeds,
// fetches and variable groups are inspected; a session on a machine without a GPU runs
// such a graph on the CPU. (The samples' --device flag is tested with their flags.)
#include <doctest/doctest.h>

#include <actorflow/actorflow.h>
#include <actorflow/ops/cuda_info.h>
#include <actorflow/ops/gpu_placement.h>

#include <map>
#include <set>

#include "../../actors/src/gpu_plan.h"
#include "interop/skip.h"
#include "test_util.h"

namespace af = actorflow;

namespace {

const af::DeviceId kCpu{af::DeviceType::CPU, 0};
const af::DeviceId kGpu0{af::DeviceType::GPU, 0};

struct Mlp {
  af::Graph g;
  struct {
    af::Output x, y, loss;
  } m;
  af::Operation train;
};

// The fashion_mnist sample's MLP (784-16-10, as its --model_network 16 builds it) and an
// optimizer step, everything under `device`.
void build_mlp(Mlp& t, const std::string& device, const std::string& optimizer = "adam") {
  namespace L = af::layers;
  af::DeviceScope scope(t.g, device);
  t.g.set_seed(1);
  t.m.x = af::placeholder(t.g, af::f32, {-1, 784}, "x");
  t.m.y = af::placeholder(t.g, af::i64, {-1}, "y");
  auto logits = L::dense(L::dense(t.m.x, 16, L::Act::relu, "dense1"), 10, {}, "logits");
  t.m.loss = af::mean(af::sparse_softmax_cross_entropy(logits, t.m.y));
  af::Output step = af::train::global_step(t.g);
  std::unique_ptr<af::optim::Optimizer> opt;
  // The samples' default learning rate.
  if (optimizer == "adam") opt = std::make_unique<af::optim::Adam>(0.01);
  else opt = std::make_unique<af::optim::GradientDescent>(0.01);
  t.train = opt->minimize(t.m.loss, {}, step);
}

std::shared_ptr<af::runtime::OptimizedPlan> plan_of(Mlp& t, int num_gpus, std::vector<std::string>* lines = nullptr) {
  af::RunRequest req;
  req.fetches = {t.m.loss};
  req.targets = {t.train};
  req.feeds = {{t.m.x, af::Tensor(af::f32, {4, 784})}, {t.m.y, af::Tensor(af::i64, {4})}};
  auto plan = af::make_step_plan(t.g, req);
  REQUIRE_MESSAGE(plan.ok(), plan.status().to_string());
  af::GraphOptimizerOptions o;
  o.fuse_elementwise = false;  // as local sessions do for graphs that ask for a GPU
  o.fuse_conv_bias_relu = false;
  auto opt = af::runtime::optimize_plan(t.g, std::move(*plan), o);
  REQUIRE_MESSAGE(opt.ok(), opt.status().to_string());
  af::runtime::GpuPlanOptions gp;
  gp.num_gpus = num_gpus;
  std::set<std::string> logged;
  std::mutex mu;
  gp.logged = &logged;
  gp.logged_mu = &mu;
  af::Status s = af::runtime::place_plan_on_gpus(t.g, **opt, gp);
  REQUIRE_MESSAGE(s.ok(), s.to_string());
  if (lines) lines->assign(logged.begin(), logged.end());
  return *opt;
}

}  // namespace

TEST_CASE("GPU plan: an MLP training step under /gpu:0 runs on the GPU, with copies only where devices change") {
  if (!af::built_with_cuda()) aft::skip("GPU placement tests skipped: built without CUDA (no GPU kernels registered)", "");
  Mlp t;
  build_mlp(t, "/gpu:0");
  std::vector<std::string> lines;
  auto p = plan_of(t, 1, &lines);
  REQUIRE(p->uses_gpu());
  const af::StepPlan& plan = p->plan();
  std::map<std::string, int> on_gpu, on_cpu;
  int to_device = 0, to_host = 0;
  for (int id : plan.nodes) {
    const af::Node& n = p->node(id);
    (p->device(id).type == af::DeviceType::GPU ? on_gpu : on_cpu)[n.op]++;
    if (n.op == "_CopyToDevice") ++to_device;
    if (n.op == "_CopyToHost") ++to_host;
    // Every data edge joins one device, except into a copy (which crosses) and into an
    // Apply op's host-memory hyperparameters.
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      const af::Endpoint& e = n.inputs[k];
      // Where the value lives: a _CopyToHost runs on its GPU and leaves its output on the host.
      const af::DeviceId from = p->node(e.node).op == "_CopyToHost" ? kCpu : p->device(e.node), to = p->device(id);
      INFO(n.name << " (" << n.op << ") input " << k << " from " << p->node(e.node).name);
      if (n.op == "_CopyToDevice") {
        CHECK(from == kCpu);
        CHECK(to == kGpu0);
      } else if (n.op == "_CopyToHost") {
        CHECK(p->device(e.node) == kGpu0);
      } else if (to == kGpu0 && af::gpu_input_in_host_memory(n.op, static_cast<int>(k))) {
        CHECK(from == kCpu);
      } else {
        CHECK(from == to);
      }
    }
  }
  // The step's compute and its state are on the GPU.
  for (const char* op : {"VariableV2", "ApplyAdam", "SparseSoftmaxCrossEntropyWithLogits", "BiasAddGrad", "Select",
                         "Greater", "Mean", "BroadcastReduced", "SumToShapeOf"}) {
    INFO(op);
    CHECK(on_gpu[op] > 0);
    CHECK(on_cpu[op] == 0);
  }
  CHECK(on_gpu["MatMul"] + on_gpu["_FusedMatMul"] > 0);
  // The global step is int64: it and its AssignAdd stay on the host, saying why.
  CHECK(on_cpu["AssignAdd"] >= 1);
  bool step_line = false;
  for (const std::string& l : lines) step_line = step_line || l.find("AssignAdd") != std::string::npos;
  CHECK(step_line);
  CHECK(to_device >= 2);  // at least the two feeds
  CHECK(to_host >= 1);    // at least the fetched loss
  // Feeds arrive through copies, the fetch leaves through one.
  std::set<af::Endpoint> fed(plan.feeds.begin(), plan.feeds.end());
  for (int id : plan.nodes) {
    const af::Node& n = p->node(id);
    for (const af::Endpoint& e : n.inputs)
      if (fed.count(e)) CHECK_MESSAGE(n.op == "_CopyToDevice", n.name << " takes a feed directly");
  }
  REQUIRE(plan.fetches.size() == 1);
  CHECK(p->node(plan.fetches[0].node).op == "_CopyToHost");
  CHECK(p->device(plan.fetches[0].node) == kGpu0);
}

TEST_CASE("GPU plan: without a GPU nothing changes, and a graph without GPU devices is not touched") {
  Mlp t;
  build_mlp(t, "/gpu:0");
  std::vector<std::string> lines;
  auto p = plan_of(t, 0, &lines);
  CHECK_FALSE(p->uses_gpu());
  for (int id : p->plan().nodes) {
    CHECK(p->device(id) == kCpu);
    CHECK(id < af::runtime::OptimizedPlan::kFirstAddedId);
  }
  // One line per node that asked for the GPU.
  CHECK_FALSE(lines.empty());
  for (const std::string& l : lines) CHECK(l.find("there is no GPU 0 (this process sees 0)") != std::string::npos);

  Mlp cpu;
  build_mlp(cpu, "");
  CHECK_FALSE(af::runtime::graph_asks_for_gpu(cpu.g));
  CHECK(af::runtime::graph_asks_for_gpu(t.g));
  auto q = plan_of(cpu, 1, &lines);
  CHECK_FALSE(q->uses_gpu());
  CHECK(lines.empty());
}

TEST_CASE("GPU placement: a variable goes to the GPU only with all its users") {
  if (!af::built_with_cuda()) aft::skip("GPU placement tests skipped: built without CUDA (no GPU kernels registered)", "");
  af::Graph g;
  af::Output a, b, sq;
  {
    af::DeviceScope gpu(g, "/gpu:0");
    a = af::variable(g, af::Tensor::from_vector<float>({1, 2}), "a");
    b = af::variable(g, af::Tensor::from_vector<float>({3, 4}), "b");
    sq = af::square(a, "sq");
  }
  // A user of b that has no GPU kernel (AssignAdd) keeps all of b on the host.
  auto bump = af::assign_add(b, af::constant(g, af::Tensor::from_vector<float>({1, 1})), "bump");
  af::GpuPlacementOptions opts;
  opts.num_gpus = 1;
  opts.log = false;
  auto p = af::place_on_gpus(g, opts);
  REQUIRE_MESSAGE(p.ok(), p.status().to_string());
  CHECK(p->devices[static_cast<size_t>(a.node_id())] == kGpu0);
  CHECK(p->devices[static_cast<size_t>(sq.node_id())] == kGpu0);
  CHECK(p->devices[static_cast<size_t>(b.node_id())] == kCpu);
  CHECK(p->devices[static_cast<size_t>(bump.node_id())] == kCpu);
  bool said = false;
  for (const std::string& l : p->fallbacks)
    said = said || (l.find("'b'") != std::string::npos && l.find("variable 'b' stays on the CPU with 'bump'") != std::string::npos);
  CHECK(said);
}

TEST_CASE("GPU placement: an Apply op's hyperparameters are host memory, its gradient is not") {
  CHECK(af::gpu_input_in_host_memory("ApplyAdam", 0));
  CHECK(af::gpu_input_in_host_memory("ApplyAdam", 5));
  CHECK_FALSE(af::gpu_input_in_host_memory("ApplyAdam", 6));
  CHECK_FALSE(af::gpu_input_in_host_memory("ApplyGradientDescent", 1));
  CHECK(af::gpu_input_in_host_memory("ApplyGradientDescent", 0));
  CHECK_FALSE(af::gpu_input_in_host_memory("ApplyFtrl", 0));
  CHECK_FALSE(af::gpu_input_in_host_memory("MatMul", 0));
}

TEST_CASE("a /gpu:0 training step runs as an unplaced one: the same bits without a GPU, within 1e-4 with one") {
  const bool gpu = af::cuda_device_count() > 0;
  auto run = [](const std::string& device) {
    Mlp t;
    build_mlp(t, device, "sgd");
    auto sess = af::Session::create(t.g);
    REQUIRE_MESSAGE(sess.ok(), sess.status().to_string());
    REQUIRE(sess->run_init().ok());
    std::vector<float> xv(8 * 784);
    for (size_t i = 0; i < xv.size(); ++i) xv[i] = static_cast<float>((i * 7919) % 255) / 255.f;
    af::Tensor x = af::Tensor::from_vector(xv, {8, 784});
    af::Tensor y = af::Tensor::from_vector<int64_t>({0, 1, 2, 3, 4, 5, 6, 7});
    std::vector<float> losses;
    for (int s = 0; s < 3; ++s) {
      auto out = sess->run({t.m.loss}, {{t.m.x, x}, {t.m.y, y}}, {t.train});
      REQUIRE_MESSAGE(out.ok(), out.status().to_string());
      losses.push_back((*out)[0].item<float>());
    }
    return losses;
  };
  const auto placed = run("/gpu:0");
  const auto plain = run("");
  REQUIRE(placed.size() == plain.size());
  // Without a GPU the placed graph runs exactly as the unplaced one: the same bits. On a
  // GPU the sums run in another order.
  for (size_t i = 0; i < placed.size(); ++i) {
    if (gpu) CHECK(placed[i] == doctest::Approx(plain[i]).epsilon(1e-4));
    else CHECK(placed[i] == plain[i]);
  }
  CHECK(placed.back() < placed.front());
}
