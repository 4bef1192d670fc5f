// Inference latency of the exported Fashion-MNIST MLP (784-256-128-10, built by the
// sample's kit::fashion_mnist_model): one forward (logits, then argmax) for 1 example and
// for a batch of 256, in microseconds. Ours goes the way a served model does: the model is
// trained a few steps, exported by af::export_model (the graph pruned to x -> prediction
// in model.afg, the weights in weights.safetensors), then loaded back by
// af::ServedModel, which restores the variables and runs the prediction on fed rows.
// libtorch runs the same three Linear layers with the same weights (checked: the same
// predictions) under NoGradGuard, then argmax.
#include <actorflow/actorflow.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <unistd.h>
#include <vector>

#include "harness/bench.h"
#include "kit/datasets.h"
#include "kit/models.h"
#ifdef AF_HAVE_TORCH
#include "peers/torch_peers.h"
#endif

namespace af = actorflow;
namespace fs = std::filesystem;

namespace {

const char* kDir = kit::kFashionMnistDir;
const std::vector<std::string> kLayers = {"dense1", "dense2", "logits"};

// The export directory, written once per process by af::export_model: the sample's MLP
// trained 100 SGD steps (so the predictions mean something).
struct Export {
  std::string dir;
  af::Tensor test_x;        // f32 [10000, 784]
  af::Tensor reference;     // the trained graph's predictions of the first 256 test rows
  ~Export() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
};

std::shared_ptr<Export> exported() {
  static std::shared_ptr<Export> e = [] {
    auto out = std::make_shared<Export>();
    auto data = kit::load_fashion_mnist(kDir);
    bench::check(data.ok(), "Fashion-MNIST not found (apt-get install dataset-fashion-mnist)");
    out->test_x = data->x_test;

    af::Graph g;
    g.set_seed(1);
    kit::Flags flags;
    flags.model = "mlp";
    flags.model_network = "256 128";
    kit::Model m = kit::fashion_mnist_model(g, flags);
    auto train = af::optim::GradientDescent(0.1).minimize(m.loss);
    // The threads the served model gets, so both compute the same sums (the reference check).
    af::SessionOptions o;
    o.intra_op_threads = bench::threads();
    auto sess = af::Session::create(g, o).value();
    bench::check(sess.run_init().ok(), "init");
    for (int64_t s = 0; s < 100; ++s) {
      int64_t b = s * 64;
      auto step = sess.run({}, {{m.x, data->x_train.slice_rows(b, b + 64)}, {m.y, data->y_train.slice_rows(b, b + 64)}},
                           {train});
      bench::check(step.ok(), "training step");
    }
    out->reference = bench::must(sess.run({m.prediction}, {{m.x, out->test_x.slice_rows(0, 256)}}), "reference predictions")[0];
    out->dir = (fs::temp_directory_path() / ("af-bench-inference-" + std::to_string(::getpid()))).string();
    bench::check(af::export_model(sess, g, m.x, m.prediction, out->dir).ok(), "export");
    return out;
  }();
  return e;
}

std::vector<int64_t> classes(const af::Tensor& t, int64_t n) {
  std::vector<int64_t> out;
  for (int64_t i = 0; i < n; ++i) out.push_back(static_cast<int64_t>(t.element_as_double(i)));
  return out;
}

bench::Prepared latency(const bench::Params& p) {
  const int64_t batch = p.at("batch");
  const int reps = static_cast<int>(p.at("reps"));
  auto e = exported();
  af::SessionOptions o;
  o.intra_op_threads = bench::threads();
  auto loaded = af::ServedModel::load(e->dir, o);
  bench::must(loaded, "load the export");
  auto s = std::make_shared<af::ServedModel>(std::move(*loaded));
  af::Tensor x = e->test_x.slice_rows(0, batch);
  // The restored model must predict what the trained one did.
  auto expected = classes(e->reference, batch);
  auto first = bench::must(s->predict(x), "first prediction");
  bench::check(classes(first, batch) == expected, "restored model predicts as the trained one");
  bench::Prepared prep;
  prep.sides.push_back({"ours",
                        "ActorFlow local session on the graph loaded from the export (af::ServedModel), "
                        "intra_op_threads=" + std::to_string(bench::threads()) + ", fetches the argmax",
                        [s, x, batch, reps, expected] {
                          af::Result<af::Tensor> out = af::Tensor{};
                          auto t0 = bench::Clock::now();
                          for (int r = 0; r < reps; ++r) out = s->predict(x);
                          double sec = bench::seconds_since(t0);
                          bench::check(classes(bench::must(out, "predict"), batch) == expected, "predictions");
                          return sec * 1e6 / reps;
                        }});
#ifdef AF_HAVE_TORCH
  peers::torch_set_threads(bench::threads());
  std::map<std::string, af::Tensor> weights;
  for (auto& w : s->weights()) weights[w.name] = w.value;
  std::vector<std::vector<float>> kernels, biases;
  for (auto& l : kLayers) {
    kernels.push_back(weights.at(l + "/kernel").to_vector<float>());
    biases.push_back(weights.at(l + "/bias").to_vector<float>());
  }
  // OpenBLAS stays at OPENBLAS_NUM_THREADS (1 in bench/run) unless
  // $BENCH_LIBTORCH_BLAS_THREADS says otherwise: with 2 OpenBLAS threads next to
  // libtorch's OpenMP pool the batch-256 forward was no faster here, and now and then
  // 2.7x slower (4.1 ms against 1.5), so 1 is the stronger peer.
  const char* blas = std::getenv("BENCH_LIBTORCH_BLAS_THREADS");
  auto t = peers::torch_mlp_inference(kernels, biases, x.data<float>(), batch, expected, reps, blas ? std::atoi(blas) : 0);
  prep.sides.push_back({"libtorch", t.threads, t.sample});
#endif
  return prep;
}

bench::Params params(int64_t batch, int64_t reps) {
  return bench::Params{{{"batch", batch}, {"reps", reps}}, {{"kind", "mlp_inference"}, {"data_dir", kDir}}};
}

}  // namespace

BENCH_CASE(bench::Case{.name = "inference_latency_1",
                       .unit = "us",
                       .higher_is_better = false,
                       .work = "exported MLP 784-256-128-10: one forward + argmax of 1 Fashion-MNIST example",
                       .params = [](bool quick) { return params(1, quick ? 500 : 2000); },
                       .prepare = latency});

BENCH_CASE(bench::Case{.name = "inference_latency_256",
                       .unit = "us",
                       .higher_is_better = false,
                       .work = "exported MLP 784-256-128-10: one forward + argmax of a batch of 256 examples",
                       .params = [](bool quick) { return params(256, quick ? 20 : 60); },
                       .prepare = latency});

int main(int argc, char** argv) { return bench::main(argc, argv); }
