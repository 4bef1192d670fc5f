// Inference latency of the exported Fashion-MNIST MLP (784-256-128-10, as
// samples/fashion_mnist builds --model mlp): one forward (logits, then argmax) for 1
// example and for a batch of 256, in microseconds. Ours goes the way a served model does:
// the model is trained a few steps, exported as samples/kit's export_model does it (the
// graph pruned to x -> prediction in model.afg, the weights in weights.safetensors), then
// loaded back with Graph::load, its variables restored from the file, and a Session runs
// the prediction on fed rows. libtorch runs the same three Linear layers with the same
// weights (checked: the same predictions) under NoGradGuard, then argmax.
#include <actorflow/actorflow.h>
#include <actorflow/data/readers.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <unistd.h>
#include <vector>

#include "harness/bench.h"
#ifdef AF_HAVE_TORCH
#include "peers/torch_peers.h"
#endif

namespace af = actorflow;
namespace ad = actorflow::data;
namespace fs = std::filesystem;

namespace {

const char* kDir = "/usr/share/datasets/fashion-mnist";
const std::vector<std::string> kLayers = {"dense1", "dense2", "logits"};

af::Tensor pixels(const std::string& file) {
  auto img = ad::read_idx(std::string(kDir) + "/" + file);
  bench::check(img.ok(), "Fashion-MNIST not found (apt-get install dataset-fashion-mnist)");
  int64_t n = img->dim(0);
  af::Tensor x(af::f32, {n, 784});
  for (int64_t i = 0; i < n * 784; ++i) x.data<float>()[i] = img->data<uint8_t>()[i] / 255.0f;
  return x;
}

// The export directory, written once per process: the MLP trained 100 SGD steps (so the
// predictions mean something), pruned to x -> prediction as kit::export_model does.
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
    af::Tensor train_x = pixels("train-images-idx3-ubyte.gz");
    auto lab = ad::read_idx(std::string(kDir) + "/train-labels-idx1-ubyte.gz");
    bench::check(lab.ok(), "Fashion-MNIST labels");
    af::Tensor train_y(af::i64, {lab->dim(0)});
    for (int64_t i = 0; i < lab->dim(0); ++i) train_y.data<int64_t>()[i] = lab->data<uint8_t>()[i];
    out->test_x = pixels("t10k-images-idx3-ubyte.gz");

    af::Graph g;
    g.set_seed(1);
    auto x = af::placeholder(g, af::f32, {-1, 784}, "x");
    auto y = af::placeholder(g, af::i64, {-1}, "y");
    auto h = af::layers::dense(x, 256, af::layers::Act::relu, kLayers[0]);
    h = af::layers::dense(h, 128, af::layers::Act::relu, kLayers[1]);
    auto logits = af::layers::dense(h, 10, {}, kLayers[2]);
    auto loss = af::mean(af::sparse_softmax_cross_entropy(logits, y));
    auto pred = af::argmax(logits, -1, "prediction");
    auto train = af::optim::GradientDescent(0.1).minimize(loss);
    // The threads the served model gets, so both compute the same sums (the reference check).
    af::SessionOptions o;
    o.intra_op_threads = bench::threads();
    af::Session sess(g, o);
    bench::check(sess.run_init().ok(), "init");
    for (int64_t s = 0; s < 100; ++s) {
      int64_t b = s * 64;
      af::Tensor bx(af::f32, {64, 784}, train_x.buffer(), static_cast<size_t>(b * 784 * 4));
      af::Tensor by(af::i64, {64}, train_y.buffer(), static_cast<size_t>(b * 8));
      bench::check(sess.run({}, {{x, bx}, {y, by}}, {train}).ok(), "training step");
    }
    af::Tensor rows256(af::f32, {256, 784}, out->test_x.buffer(), 0);
    out->reference = bench::must(sess.run({pred}, {{x, rows256}}), "reference predictions")[0];

    // The export: every node the prediction reaches through data edges, in id order.
    std::vector<char> need(static_cast<size_t>(g.num_nodes()), 0);
    std::vector<int> stack{pred.node_id()};
    while (!stack.empty()) {
      int id = stack.back();
      stack.pop_back();
      if (need[static_cast<size_t>(id)]) continue;
      need[static_cast<size_t>(id)] = 1;
      for (auto& in : g.node(id).inputs) stack.push_back(in.node);
    }
    af::Graph pruned;
    std::map<int, int> remap;
    std::vector<af::Fetch> vars;
    std::vector<std::string> var_names;
    for (int id = 0; id < g.num_nodes(); ++id) {
      if (!need[static_cast<size_t>(id)]) continue;
      af::Node n = g.node(id);
      for (auto& in : n.inputs) in.node = remap.at(in.node);
      n.control_inputs.clear();
      remap[id] = bench::must(pruned.add_node_raw(n), "export " + n.name).node_id();
      if (n.op == "VariableV2") {
        vars.push_back(af::Output(&g, id, 0));
        var_names.push_back(n.name);
      }
    }
    out->dir = (fs::temp_directory_path() / ("af-bench-inference-" + std::to_string(::getpid()))).string();
    fs::create_directories(out->dir);
    bench::check(pruned.save(out->dir + "/model.afg").ok(), "save model.afg");
    auto values = bench::must(sess.run(vars), "read the weights");
    std::vector<af::NamedTensor> weights;
    for (size_t i = 0; i < vars.size(); ++i) weights.push_back({var_names[i], values[i]});
    bench::check(af::write_safetensors(out->dir + "/weights.safetensors", weights).ok(), "write weights");
    return out;
  }();
  return e;
}

// A model loaded from the export, as kit::predict_with_export loads it.
struct Served {
  std::unique_ptr<af::Graph> g;
  std::unique_ptr<af::Session> sess;
  af::Output in, pred;
  std::map<std::string, af::Tensor> weights;
};

std::shared_ptr<Served> serve(const Export& e) {
  auto s = std::make_shared<Served>();
  auto loaded = af::Graph::load(e.dir + "/model.afg");
  bench::must(loaded, "load model.afg");
  s->g = std::move(*loaded);
  s->in = bench::must(s->g->find_output("x"), "find x");
  s->pred = bench::must(s->g->find_output("prediction"), "find prediction");
  af::FeedDict feeds;
  std::vector<af::Operation> assigns;
  auto weights = af::read_safetensors(e.dir + "/weights.safetensors");
  for (auto& w : bench::must(weights, "read weights")) {
    const af::Node* var = s->g->find_node(w.name);
    bench::check(var && var->op == "VariableV2", "exported weight " + w.name + " is a variable of the model");
    af::Output p = af::placeholder(*s->g, w.value.dtype(), w.value.shape(), w.name + "/restore_value");
    assigns.push_back(af::Operation(af::assign(af::Output(s->g.get(), var->id, 0), p, w.name + "/restore")));
    feeds.push_back({p, w.value});
    s->weights[w.name] = w.value;
  }
  af::SessionOptions o;
  o.intra_op_threads = bench::threads();
  s->sess = std::make_unique<af::Session>(*s->g, o);
  bench::check(s->sess->run({}, feeds, assigns).ok(), "restore the weights");
  return s;
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
  auto s = serve(*e);
  af::Tensor x(af::f32, {batch, 784}, e->test_x.buffer(), 0);
  // The restored model must predict what the trained one did.
  auto expected = classes(e->reference, batch);
  auto first = bench::must(s->sess->run({s->pred}, {{s->in, x}}), "first prediction");
  bench::check(classes(first[0], batch) == expected, "restored model predicts as the trained one");
  bench::Prepared prep;
  prep.sides.push_back({"ours",
                        "ActorFlow local session on the graph loaded from the export (Graph::load + safetensors), "
                        "intra_op_threads=" + std::to_string(bench::threads()) + ", fetches the argmax",
                        [s, x, batch, reps, expected] {
                          af::Result<std::vector<af::Tensor>> out = std::vector<af::Tensor>{};
                          auto t0 = bench::Clock::now();
                          for (int r = 0; r < reps; ++r) out = s->sess->run({s->pred}, {{s->in, x}});
                          double sec = bench::seconds_since(t0);
                          bench::check(classes(bench::must(out, "predict")[0], batch) == expected, "predictions");
                          return sec * 1e6 / reps;
                        }});
#ifdef AF_HAVE_TORCH
  peers::torch_set_threads(bench::threads());
  std::vector<std::vector<float>> kernels, biases;
  for (auto& l : kLayers) {
    kernels.push_back(s->weights.at(l + "/kernel").to_vector<float>());
    biases.push_back(s->weights.at(l + "/bias").to_vector<float>());
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
