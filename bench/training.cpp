// Training benchmarks on Fashion-MNIST (Debian's dataset-fashion-mnist): the MLP
// 784-256-128-10 with SGD 0.1 at batch 64, seconds per epoch (938 steps) against
// libtorch doing the same steps on the same batches; and the input pipeline alone
// (shuffle + batch over the actor pipeline), examples per second.
#include <actorflow/actorflow.h>
#include <actorflow/data/dataset.h>
#include <actorflow/data/readers.h>

#include <filesystem>
#include <fstream>
#include <memory>

#include "harness/bench.h"
#ifdef AF_HAVE_TORCH
#include "peers/torch_peers.h"
#endif

namespace af = actorflow;
namespace ad = actorflow::data;

namespace {

const char* kDir = "/usr/share/datasets/fashion-mnist";
constexpr int64_t kBatch = 64;
constexpr int64_t kStepsPerEpoch = 938;

struct Data {
  af::Tensor x;  // f32 [60000, 784]
  af::Tensor y;  // i64 [60000]
};

std::shared_ptr<Data> load() {
  static std::shared_ptr<Data> d = [] {
    auto img = ad::read_idx(std::string(kDir) + "/train-images-idx3-ubyte.gz");
    auto lab = ad::read_idx(std::string(kDir) + "/train-labels-idx1-ubyte.gz");
    bench::check(img.ok() && lab.ok(), "Fashion-MNIST not found (apt-get install dataset-fashion-mnist)");
    auto out = std::make_shared<Data>();
    int64_t n = img->dim(0);
    out->x = af::Tensor(af::f32, {n, 784});
    out->y = af::Tensor(af::i64, {n});
    for (int64_t i = 0; i < n * 784; ++i) out->x.data<float>()[i] = img->data<uint8_t>()[i] / 255.0f;
    for (int64_t i = 0; i < n; ++i) out->y.data<int64_t>()[i] = lab->data<uint8_t>()[i];
    return out;
  }();
  return d;
}

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
    std::vector<af::Tensor> bx, by;
    size_t next = 0;
  };
  auto f = std::make_shared<Fixture>();
  f->g.set_seed(1);
  f->x = af::placeholder(f->g, af::f32, {-1, 784}, "x");
  f->y = af::placeholder(f->g, af::i64, {-1}, "y");
  auto h = af::layers::dense(f->x, 256, af::layers::Act::relu, "fc1");
  h = af::layers::dense(h, 128, af::layers::Act::relu, "fc2");
  auto logits = af::layers::dense(h, 10, {}, "fc3");
  f->loss = af::mean(af::sparse_softmax_cross_entropy(logits, f->y));
  f->train = af::optim::GradientDescent(0.1).minimize(f->loss);
  af::SessionOptions o;
  o.intra_op_threads = bench::threads();
  f->sess = std::make_unique<af::Session>(f->g, o);
  bench::check(f->sess->run_init().ok(), "init");
  // The same batches for both sides: consecutive rows (the data set's own order).
  for (int64_t b = 0; b + kBatch <= data->x.dim(0); b += kBatch) {
    f->bx.push_back(af::Tensor(af::f32, {kBatch, 784}, data->x.buffer(), static_cast<size_t>(b * 784 * 4)));
    f->by.push_back(af::Tensor(af::i64, {kBatch}, data->y.buffer(), static_cast<size_t>(b * 8)));
  }
  bench::Prepared prep;
  prep.sides.push_back({"ours", "ActorFlow local session, intra_op_threads=" + std::to_string(bench::threads()),
                        [f, steps] {
                          auto t0 = bench::Clock::now();
                          for (int s = 0; s < steps; ++s) {
                            size_t i = f->next++ % f->bx.size();
                            auto out = f->sess->run({}, {{f->x, f->bx[i]}, {f->y, f->by[i]}}, {f->train});
                            bench::check(out.ok(), "mlp step");
                          }
                          return bench::seconds_since(t0) * kStepsPerEpoch / steps;
                        }});
#ifdef AF_HAVE_TORCH
  peers::torch_set_threads(bench::threads());
  std::vector<const float*> xs;
  std::vector<const int64_t*> ys;
  for (size_t i = 0; i < f->bx.size(); ++i) {
    xs.push_back(f->bx[i].data<float>());
    ys.push_back(f->by[i].data<int64_t>());
  }
  auto t = peers::torch_mlp_training(xs, ys, kBatch, steps);
  prep.sides.push_back({"libtorch", t.threads, [t, steps] { return t.sample() * kStepsPerEpoch / steps; }});
#endif
  return prep;
}

bench::Prepared pipeline(const bench::Params& p) {
  auto data = load();
  const int64_t rows = p.at("rows");
  af::Tensor x(af::f32, {rows, 784}, data->x.buffer(), 0);
  af::Tensor y(af::i64, {rows}, data->y.buffer(), 0);
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
                         return bench::Params{{{"steps", quick ? 200 : kStepsPerEpoch}}, {{"kind", "mlp_training"}}};
                       },
                       .prepare = mlp,
                       .note = "target ratio <= 1.0 (issue 5); process peak RSS is printed at exit"});

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
