// Training benchmarks on Fashion-MNIST (Debian's dataset-fashion-mnist): the MLP
// 784-256-128-10 with SGD 0.1 at batch 64, seconds per epoch (938 steps), and the CNN of
// samples/fashion_mnist --model cnn with Adam at batch 50, seconds per 100 steps, each
// against libtorch doing the same steps on the same batches; and the input pipeline
// alone (shuffle + batch over the actor pipeline), examples per second.
#include <actorflow/actorflow.h>
#include <actorflow/data/dataset.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "harness/bench.h"
#include "kit/models.h"
#ifdef AF_HAVE_TORCH
#include "peers/torch_peers.h"
#endif

namespace af = actorflow;
namespace ad = actorflow::data;

namespace {

const char* kDir = kit::kFashionMnistDir;
constexpr int64_t kBatch = 64;
constexpr int64_t kStepsPerEpoch = 938;
constexpr int64_t kCnnBatch = 50;
// 0.04 to 0.16 s a step on this machine (the higher figures under load): 20 steps a sample
// keep the full case (13 pairs) within a minute a peer; 5 with --quick.
constexpr int64_t kCnnStepsFull = 20;

struct Data {
  af::Tensor x;  // f32 [60000, 784]
  af::Tensor y;  // i64 [60000]
};

std::shared_ptr<Data> load() {
  static std::shared_ptr<Data> d = [] {
    auto split = kit::load_fashion_mnist(kDir);
    bench::check(split.ok(), "Fashion-MNIST not found (apt-get install dataset-fashion-mnist)");
    return std::make_shared<Data>(Data{split->x_train, split->y_train});
  }();
  return d;
}

// The data set as consecutive batches of `batch` rows (views, no copy): the same batches,
// in the data set's own order, for every side.
void batches(const Data& d, int64_t batch, std::vector<af::Tensor>* bx, std::vector<af::Tensor>* by) {
  for (int64_t b = 0; b + batch <= d.x.dim(0); b += batch) {
    bx->push_back(d.x.slice_rows(b, b + batch));
    by->push_back(d.y.slice_rows(b, b + batch));
  }
}

#ifdef AF_HAVE_TORCH
// The batches as the libtorch peer takes them: the same memory, no copy.
std::pair<std::vector<const float*>, std::vector<const int64_t*>> batch_pointers(const std::vector<af::Tensor>& bx,
                                                                                 const std::vector<af::Tensor>& by) {
  std::vector<const float*> xs;
  std::vector<const int64_t*> ys;
  for (size_t i = 0; i < bx.size(); ++i) {
    xs.push_back(bx[i].data<float>());
    ys.push_back(by[i].data<int64_t>());
  }
  return {xs, ys};
}
#endif

long peak_rss_kib() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::stol(line.substr(6));
  return -1;
}

bench::Prepared mlp(const bench::Params& p) {
  const int steps = static_cast<int>(p.at("steps"));
  auto data = load();
  struct Fixture {
    af::Graph g;
    af::Output x, y, loss;
    af::Operation train;
    std::unique_ptr<af::Session> sess;
    af::Callable step;
    std::vector<af::Tensor> bx, by;
    size_t next = 0;
  };
  auto f = std::make_shared<Fixture>();
  // The sample's MLP (samples/fashion_mnist --model mlp, 784-256-128-10, seed 1).
  f->g.set_seed(1);
  kit::Flags flags;
  flags.model = "mlp";
  flags.model_network = "256 128";
  kit::Model m = kit::fashion_mnist_model(f->g, flags);
  f->x = m.x;
  f->y = m.y;
  f->loss = m.loss;
  f->train = af::optim::GradientDescent(0.1).minimize(f->loss);
  af::SessionOptions o;
  o.intra_op_threads = bench::threads();
  // A timeline of every kernel for profiling (Chrome trace JSON, written at exit).
  if (const char* t = std::getenv("BENCH_MLP_TRACE")) o.trace_path = t;
  f->sess = std::make_unique<af::Session>(af::Session::create(f->g, o).value());
  bench::check(f->sess->run_init().ok(), "init");
  // Every side fetches the loss of each step, as a training loop that logs it does.
  f->step = bench::must(f->sess->make_callable({f->loss}, {f->x, f->y}, {f->train}), "make_callable");
  batches(*data, kBatch, &f->bx, &f->by);
  bench::Prepared prep;
  prep.sides.push_back({"ours",
                        "ActorFlow local session, intra_op_threads=" + std::to_string(bench::threads()) +
                            ", Session::make_callable step, loss fetched every step",
                        [f, steps] {
                          af::Result<std::vector<af::Tensor>> out = std::vector<af::Tensor>{};
                          auto t0 = bench::Clock::now();
                          for (int s = 0; s < steps; ++s) {
                            size_t i = f->next++ % f->bx.size();
                            out = f->step({f->bx[i], f->by[i]});
                            bench::check(out.ok(), "mlp step");
                          }
                          double sec = bench::seconds_since(t0);
                          bench::check(std::isfinite((*out)[0].item<float>()), "mlp loss");
                          return sec * kStepsPerEpoch / steps;
                        }});
#ifdef AF_HAVE_TORCH
  peers::torch_set_threads(bench::threads());
  auto [xs, ys] = batch_pointers(f->bx, f->by);
  auto t = peers::torch_mlp_training(xs, ys, kBatch, steps);
  prep.sides.push_back({"libtorch", t.threads, [t, steps] { return t.sample() * kStepsPerEpoch / steps; }});
#endif
  return prep;
}

// OpenBLAS threads of libtorch's CNN: $BENCH_LIBTORCH_BLAS_THREADS, else OPENBLAS_NUM_THREADS
// (1 in bench/run), as mlp_training. Its convolutions run on oneDNN over libtorch's own
// pool; only the two Linear layers reach OpenBLAS, and 2 threads there changed nothing
// measurable here (6.16 against 6.09 s per 100 steps).
[[maybe_unused]] int libtorch_blas_threads() {
  const char* e = std::getenv("BENCH_LIBTORCH_BLAS_THREADS");
  return e ? std::atoi(e) : 0;
}

bench::Prepared cnn(const bench::Params& p) {
  const int steps = static_cast<int>(p.at("steps"));
  auto data = load();
  struct Fixture {
    af::Graph g;
    af::Output x, y, training, loss;
    af::Operation train;
    std::unique_ptr<af::Session> sess;
    af::Callable step;
    std::vector<af::Tensor> bx, by;
    af::Tensor yes = af::Tensor::scalar(true);
    size_t next = 0;
  };
  auto f = std::make_shared<Fixture>();
  // The sample's CNN (samples/fashion_mnist --model cnn, seed 1, keep 0.5).
  f->g.set_seed(1);
  kit::Flags flags;
  flags.model = "cnn";
  flags.dropout_keep_prob = 0.5;
  kit::Model m = kit::fashion_mnist_model(f->g, flags);
  f->x = m.x;
  f->y = m.y;
  f->training = m.training;
  f->loss = m.loss;
  f->train = af::optim::Adam(1e-3).minimize(f->loss);
  af::SessionOptions o;
  o.intra_op_threads = bench::threads();
  f->sess = std::make_unique<af::Session>(af::Session::create(f->g, o).value());
  bench::check(f->sess->run_init().ok(), "init");
  f->step = bench::must(f->sess->make_callable({f->loss}, {f->x, f->y, f->training}, {f->train}), "make_callable");
  batches(*data, kCnnBatch, &f->bx, &f->by);
  bench::Prepared prep;
  prep.sides.push_back({"ours", "ActorFlow local session, intra_op_threads=" + std::to_string(bench::threads()) +
                                    ", NHWC, training fed true, Session::make_callable step, loss fetched every step",
                        [f, steps] {
                          af::Result<std::vector<af::Tensor>> out = std::vector<af::Tensor>{};
                          auto t0 = bench::Clock::now();
                          for (int s = 0; s < steps; ++s) {
                            size_t i = f->next++ % f->bx.size();
                            out = f->step({f->bx[i], f->by[i], f->yes});
                            bench::check(out.ok(), "cnn step");
                          }
                          double sec = bench::seconds_since(t0);
                          bench::check(std::isfinite((*out)[0].data<float>()[0]), "cnn loss");
                          return sec * 100 / steps;
                        }});
#ifdef AF_HAVE_TORCH
  peers::torch_set_threads(bench::threads());
  auto [xs, ys] = batch_pointers(f->bx, f->by);
  auto t = peers::torch_cnn_training(xs, ys, kCnnBatch, steps, libtorch_blas_threads());
  prep.sides.push_back({"libtorch", t.threads, [t, steps] { return t.sample() * 100 / steps; }});
#endif
  return prep;
}

// ---- peak_rss: one MLP epoch in a fresh process per side, its VmHWM read at the end ----

// Runs bench/peak_rss_<side> (bench/peak_rss/ours_epoch.cpp, bench/peers/torch_epoch.cpp:
// each links its own framework only and loads the data set as its users do) and returns
// its peak RSS in MiB.
double child_peak_rss_mib(const std::string& side) {
  const std::filesystem::path exe =
      std::filesystem::read_symlink("/proc/self/exe").parent_path() / ("peak_rss_" + side);
  std::string cmd = "'" + exe.string() + "'";
  FILE* pipe = popen(cmd.c_str(), "r");
  bench::check(pipe != nullptr, "peak_rss: cannot start " + cmd);
  long kib = -1;
  int got = std::fscanf(pipe, "%ld", &kib);
  int rc = pclose(pipe);
  bench::check(got == 1 && rc == 0 && kib > 0, "peak_rss: " + cmd + " failed (exit " + std::to_string(rc) + ")");
  return static_cast<double>(kib) / 1024.0;
}

bench::Prepared peak_rss(const bench::Params&) {
  bench::Prepared prep;
  prep.sides.push_back({"ours",
                        "a fresh process linking ActorFlow only: the MLP epoch of mlp_training fed by the kit's "
                        "input pipeline over u8 pixels (as samples/fashion_mnist), VmHWM at exit",
                        [] { return child_peak_rss_mib("ours"); }});
#ifdef AF_HAVE_TORCH
  prep.sides.push_back({"libtorch",
                        "a fresh process linking libtorch only: the data set loaded once as torch::data's MNIST "
                        "(f32), the same epoch, VmHWM at exit",
                        [] { return child_peak_rss_mib("libtorch"); }});
#endif
  return prep;
}

bench::Prepared pipeline(const bench::Params& p) {
  auto data = load();
  const int64_t rows = p.at("rows");
  af::Tensor x = data->x.slice_rows(0, rows);
  af::Tensor y = data->y.slice_rows(0, rows);
  auto seed = std::make_shared<uint64_t>(1);
  bench::Prepared prep;
  prep.sides.push_back({"ours", "actor pipeline: from_tensors -> shuffle(all) -> batch(64) -> prefetch(8)", [x, y, rows, seed] {
                          auto it = ad::Dataset::from_tensors({x, y}).shuffle(rows, (*seed)++).batch(kBatch).prefetch(8).make_iterator();
                          ad::Components c;
                          int64_t n = 0;
                          auto t0 = bench::Clock::now();
                          while (true) {
                            auto more = it->next(&c);
                            bench::check(more.ok(), "pipeline");
                            if (!*more) break;
                            n += c[0].dim(0);
                          }
                          return static_cast<double>(n) / bench::seconds_since(t0);
                        }});
  return prep;
}

}  // namespace

BENCH_CASE(bench::Case{.name = "mlp_training",
                       .unit = "s",
                       .higher_is_better = false,
                       .work = "Fashion-MNIST MLP 784-256-128-10, SGD 0.1, batch 64: seconds per epoch (938 steps)",
                       .params = [](bool quick) {
                         // "per": the steps the unit counts (the Python peers scale by it).
                         return bench::Params{
                             {{"steps", quick ? 100 : kStepsPerEpoch}, {"batch", kBatch}, {"per", kStepsPerEpoch}},
                             {{"kind", "mlp_training"}, {"data_dir", kDir}}};
                       },
                       .prepare = mlp,
                       .note = "target ratio <= 1.0; process peak RSS is printed at exit"});

BENCH_CASE(bench::Case{.name = "cnn_training",
                       .unit = "s",
                       .higher_is_better = false,
                       .work = "Fashion-MNIST CNN of samples/fashion_mnist --model cnn (conv 5x5x32, pool, conv 5x5x64, "
                               "pool, dense 1024, dropout 0.5, dense 10), Adam 1e-3, batch 50: seconds per 100 steps",
                       .params = [](bool quick) {
                         return bench::Params{
                             {{"steps", quick ? 5 : kCnnStepsFull}, {"batch", kCnnBatch}, {"per", 100}},
                             {{"kind", "cnn_training"}, {"data_dir", kDir}}};
                       },
                       .prepare = cnn});

BENCH_CASE(bench::Case{.name = "peak_rss",
                       .unit = "MiB",
                       .higher_is_better = false,
                       .work = "peak RSS (VmHWM) of a process that loads Fashion-MNIST and trains the MLP for one epoch",
                       // A peak is a peak: 3 pairs, no warm-up (driver.py reads these two).
                       .params = [](bool) { return bench::Params{{{"pairs", 3}, {"warmup", 0}}, {{"kind", "peak_rss"}}}; },
                       .prepare = peak_rss,
                       .skip_in_quick = true,
                       .note = "goal: ours <= 0.5x libtorch's; each sample is a whole epoch in a new process"});

BENCH_CASE(bench::Case{.name = "input_pipeline",
                       .unit = "ex/s",
                       .higher_is_better = true,
                       .work = "one epoch of 60000 Fashion-MNIST examples through shuffle + batch 64 + prefetch",
                       .params = [](bool) { return bench::Params{{{"rows", 60000}}, {{"kind", "input_pipeline"}}}; },
                       .prepare = pipeline,
                       .note = "must be >= 10x the examples/s the MLP consumes (60000 / mlp_training seconds)"});

int main(int argc, char** argv) {
  int rc = bench::main(argc, argv);
  std::printf("#   note: process peak RSS %ld MiB (ours and libtorch in one process)\n", peak_rss_kib() / 1024);
  return rc;
}
