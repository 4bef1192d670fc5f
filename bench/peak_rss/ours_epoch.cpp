// The ActorFlow child of the peak_rss case (bench/training.cpp): one epoch of the
// Fashion-MNIST MLP of mlp_training (784-256-128-10, seed 1, SGD 0.1, batch 64, the loss
// fetched every step), fed as the samples feed it: the kit's loader keeps the training
// images as bytes (Pixels::u8) and the kit's input pipeline (kit::training_batches: the
// data set's own order here, as mlp_training's batches) scales each batch to f32 as it
// reads it. Links ActorFlow alone. Prints its peak RSS (VmHWM) in KiB, then exits.
#include <actorflow/actorflow.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "kit/datasets.h"
#include "kit/models.h"

namespace af = actorflow;
namespace ad = actorflow::data;

namespace {

long peak_rss_kib() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::stol(line.substr(6));
  return -1;
}

int fail(const std::string& what) {
  std::fprintf(stderr, "peak_rss_ours: %s\n", what.c_str());
  return 1;
}

}  // namespace

int main() {
  const char* e = std::getenv("BENCH_THREADS");
  const int threads = e && std::atoi(e) > 0 ? std::atoi(e) : 2;
  auto train = kit::load_fashion_mnist_part(kit::kFashionMnistDir, "train", kit::Pixels::u8);
  if (!train.ok()) return fail(train.status().to_string());

  af::Graph g;
  g.set_seed(1);
  kit::Flags flags;
  flags.model = "mlp";
  flags.model_network = "256 128";
  kit::Model m = kit::fashion_mnist_model(g, flags);
  af::Operation train_op = af::optim::GradientDescent(0.1).minimize(m.loss);
  af::SessionOptions o;
  o.intra_op_threads = threads;
  auto sess = af::Session::create(g, o);
  if (!sess.ok()) return fail(sess.status().to_string());
  if (auto s = sess->run_init(); !s.ok()) return fail(s.to_string());
  auto step = sess->make_callable({m.loss}, {m.x, m.y}, {train_op});
  if (!step.ok()) return fail(step.status().to_string());

  auto it = kit::training_batches(train->first, train->second, 64, std::nullopt).make_iterator();
  ad::Components batch;
  int64_t steps = 0, examples = 0;
  float loss = NAN;
  while (true) {
    auto more = it->next(&batch);
    if (!more.ok()) return fail(more.status().to_string());
    if (!*more) break;
    auto out = (*step)({batch[0], batch[1]});
    if (!out.ok()) return fail(out.status().to_string());
    loss = (*out)[0].item<float>();
    ++steps;
    examples += batch[0].dim(0);
  }
  if (examples != train->first.dim(0) || !std::isfinite(loss))
    return fail("the epoch saw " + std::to_string(examples) + " examples in " + std::to_string(steps) +
                " steps, last loss " + std::to_string(loss));
  std::printf("%ld\n", peak_rss_kib());
  return 0;
}
