#include "torch_peers.h"

#include <dlfcn.h>
#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <memory>
#include <stdexcept>

namespace peers {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

void check(bool ok, const char* what) {
  if (!ok) throw std::runtime_error(std::string("libtorch peer: wrong result: ") + what);
}

std::string thread_words() {
  return "libtorch " + std::string(TORCH_VERSION) + " at::set_num_threads(" +
         std::to_string(at::get_num_threads()) + ")";
}

// OpenBLAS's own thread count, reached through the symbols libopenblas exports (libtorch
// calls sgemm through Debian's libblas.so.3 alternative, which is OpenBLAS here).
using SetThreads = void (*)(int);
using GetThreads = int (*)();
SetThreads openblas_set() { return reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads")); }
GetThreads openblas_get() { return reinterpret_cast<GetThreads>(dlsym(RTLD_DEFAULT, "openblas_get_num_threads")); }

}  // namespace

void torch_set_threads(int n) { at::set_num_threads(n); }

TorchSide torch_scalar_chain(int n, int reps) {
  auto one = std::make_shared<at::Tensor>(torch::ones({}, torch::kFloat32));
  auto sample = [one, n, reps] {
    torch::NoGradGuard no_grad;
    double total = 0;
    for (int r = 0; r < reps; ++r) {
      auto y = torch::zeros({}, torch::kFloat32);
      auto t0 = Clock::now();
      for (int i = 0; i < n; ++i) y = y + *one;
      total += seconds_since(t0);
      check(y.item<float>() == static_cast<float>(n), "scalar chain");
    }
    return total * 1e6 / (static_cast<double>(n) * reps);
  };
  return {sample, thread_words() + ", eager, NoGradGuard"};
}

TorchSide torch_one_op(int reps) {
  auto x = std::make_shared<at::Tensor>(torch::ones({}, torch::kFloat32));
  auto sample = [x, reps] {
    torch::NoGradGuard no_grad;
    at::Tensor y;
    auto t0 = Clock::now();
    for (int r = 0; r < reps; ++r) y = torch::neg(*x);
    double s = seconds_since(t0);
    check(y.item<float>() == -1.0f, "neg");
    return s * 1e6 / reps;
  };
  return {sample, thread_words() + ", eager torch::neg on a scalar"};
}

TorchSide torch_matmul(int64_t n, int reps, int blas_threads) {
  auto a = std::make_shared<at::Tensor>(torch::full({n, n}, 1.0f / static_cast<float>(n)));
  auto b = std::make_shared<at::Tensor>(torch::ones({n, n}, torch::kFloat32));
  auto set = openblas_set();
  auto get = openblas_get();
  int before = get ? get() : -1;
  std::string words = thread_words();
  if (set && blas_threads > 0) {
    words += ", openblas_set_num_threads(" + std::to_string(blas_threads) + ") for this case";
  } else {
    words += ", OpenBLAS " + (before > 0 ? std::to_string(before) + " thread(s)" : std::string("(not found)"));
  }
  auto sample = [a, b, n, reps, set, before, blas_threads] {
    torch::NoGradGuard no_grad;
    if (set && blas_threads > 0) set(blas_threads);
    at::Tensor c;
    auto t0 = Clock::now();
    for (int r = 0; r < reps; ++r) c = torch::mm(*a, *b);
    double s = seconds_since(t0);
    if (set && blas_threads > 0 && before > 0) set(before);
    check(std::abs(c[0][0].item<float>() - 1.0f) < 1e-3f, "matmul");
    return 2.0 * n * n * n * reps / s / 1e9;
  };
  return {sample, words};
}

TorchSide torch_add(int64_t elements, int reps) {
  auto a = std::make_shared<at::Tensor>(torch::full({elements}, 1.0f));
  auto b = std::make_shared<at::Tensor>(torch::full({elements}, 2.0f));
  // The output is allocated and faulted in once, then reused: ours writes into pooled
  // buffers, so the peer must not pay a fresh page fault per 4 KiB on every op either.
  auto c = std::make_shared<at::Tensor>(torch::zeros({elements}, torch::kFloat32));
  auto sample = [a, b, c, elements, reps] {
    torch::NoGradGuard no_grad;
    auto t0 = Clock::now();
    for (int r = 0; r < reps; ++r) torch::add_out(*c, *a, *b);
    double s = seconds_since(t0);
    check((*c)[elements - 1].item<float>() == 3.0f, "add");
    return 3.0 * 4.0 * static_cast<double>(elements) * reps / s / 1e9;
  };
  return {sample, thread_words() + ", torch::add_out into a reused, pre-faulted output"};
}

TorchSide torch_sum(int64_t elements, int reps) {
  auto a = std::make_shared<at::Tensor>(torch::full({elements}, 1.0f));
  auto sample = [a, elements, reps] {
    torch::NoGradGuard no_grad;
    at::Tensor c;
    auto t0 = Clock::now();
    for (int r = 0; r < reps; ++r) c = a->sum();
    double s = seconds_since(t0);
    check(std::abs(c.item<float>() - static_cast<float>(elements)) < 1e-3f * static_cast<float>(elements), "sum");
    return 4.0 * static_cast<double>(elements) * reps / s / 1e9;
  };
  return {sample, thread_words() + ", a.sum()"};
}

}  // namespace peers

namespace peers {

TorchSide torch_mlp_training(const std::vector<const float*>& xs, const std::vector<const int64_t*>& ys, int64_t batch,
                             int steps) {
  struct Net : torch::nn::Module {
    Net() {
      fc1 = register_module("fc1", torch::nn::Linear(784, 256));
      fc2 = register_module("fc2", torch::nn::Linear(256, 128));
      fc3 = register_module("fc3", torch::nn::Linear(128, 10));
    }
    torch::Tensor forward(torch::Tensor x) {
      return fc3->forward(torch::relu(fc2->forward(torch::relu(fc1->forward(x)))));
    }
    torch::nn::Linear fc1{nullptr}, fc2{nullptr}, fc3{nullptr};
  };
  auto net = std::make_shared<Net>();
  auto opt = std::make_shared<torch::optim::SGD>(net->parameters(), torch::optim::SGDOptions(0.1));
  std::vector<torch::Tensor> bx, by;
  for (size_t i = 0; i < xs.size(); ++i) {
    bx.push_back(torch::from_blob(const_cast<float*>(xs[i]), {batch, 784}, torch::kFloat32));
    by.push_back(torch::from_blob(const_cast<int64_t*>(ys[i]), {batch}, torch::kInt64));
  }
  auto next = std::make_shared<size_t>(0);
  TorchSide side;
  side.threads = "libtorch intra-op threads=" + std::to_string(at::get_num_threads()) +
                 ", OpenBLAS threads from OPENBLAS_NUM_THREADS, loss read every step";
  side.sample = [net, opt, bx, by, steps, next] {
    float last = 0;
    auto t0 = Clock::now();
    for (int s = 0; s < steps; ++s) {
      size_t i = (*next)++ % bx.size();
      opt->zero_grad();
      auto loss = torch::nn::functional::cross_entropy(net->forward(bx[i]), by[i]);
      loss.backward();
      opt->step();
      // Ours fetches the loss every step; so does this side (a training loop logging it).
      last = loss.item<float>();
    }
    double sec = seconds_since(t0);
    check(std::isfinite(last), "mlp loss");
    return sec;
  };
  return side;
}

}  // namespace peers

namespace peers {
namespace {

// Sets OpenBLAS to `n` threads for one sample and back to what it was after (matmul-heavy
// peers: libtorch's own pool idles inside sgemm, so OpenBLAS's threads are its threads).
class BlasThreads {
 public:
  explicit BlasThreads(int n) : set_(n > 0 ? openblas_set() : nullptr), before_(openblas_get() ? openblas_get()() : -1) {
    if (set_) set_(n);
  }
  ~BlasThreads() {
    if (set_ && before_ > 0) set_(before_);
  }
  BlasThreads(const BlasThreads&) = delete;
  BlasThreads& operator=(const BlasThreads&) = delete;

 private:
  SetThreads set_;
  int before_;
};

std::string blas_words(int blas_threads) {
  auto get = openblas_get();
  if (blas_threads > 0 && openblas_set()) return ", openblas_set_num_threads(" + std::to_string(blas_threads) + ") for this case";
  return ", OpenBLAS " + (get ? std::to_string(get()) + " thread(s)" : std::string("(not found)"));
}

}  // namespace

TorchSide torch_cnn_training(const std::vector<const float*>& xs, const std::vector<const int64_t*>& ys, int64_t batch,
                             int steps, int blas_threads) {
  namespace nn = torch::nn;
  struct Net : nn::Module {
    Net() {
      conv1 = register_module("conv1", nn::Conv2d(nn::Conv2dOptions(1, 32, 5).padding(2)));
      conv2 = register_module("conv2", nn::Conv2d(nn::Conv2dOptions(32, 64, 5).padding(2)));
      pool = register_module("pool", nn::MaxPool2d(nn::MaxPool2dOptions(2).stride(2)));
      fc1 = register_module("fc1", nn::Linear(7 * 7 * 64, 1024));
      drop = register_module("drop", nn::Dropout(0.5));
      fc2 = register_module("fc2", nn::Linear(1024, 10));
    }
    torch::Tensor forward(torch::Tensor x) {
      auto h = pool->forward(torch::relu(conv1->forward(x.view({-1, 1, 28, 28}))));
      h = pool->forward(torch::relu(conv2->forward(h)));
      h = drop->forward(torch::relu(fc1->forward(h.flatten(1))));
      return fc2->forward(h);
    }
    nn::Conv2d conv1{nullptr}, conv2{nullptr};
    nn::MaxPool2d pool{nullptr};
    nn::Linear fc1{nullptr}, fc2{nullptr};
    nn::Dropout drop{nullptr};
  };
  auto net = std::make_shared<Net>();
  net->train();
  auto opt = std::make_shared<torch::optim::Adam>(net->parameters(), torch::optim::AdamOptions(1e-3));
  std::vector<torch::Tensor> bx, by;
  for (size_t i = 0; i < xs.size(); ++i) {
    bx.push_back(torch::from_blob(const_cast<float*>(xs[i]), {batch, 784}, torch::kFloat32));
    by.push_back(torch::from_blob(const_cast<int64_t*>(ys[i]), {batch}, torch::kInt64));
  }
  auto next = std::make_shared<size_t>(0);
  TorchSide side;
  side.threads = thread_words() + blas_words(blas_threads) + ", mkldnn " + (at::hasMKLDNN() ? "available" : "absent") +
                 ", NCHW, torch::optim::Adam";
  side.sample = [net, opt, bx, by, steps, next, blas_threads] {
    BlasThreads blas(blas_threads);
    torch::Tensor loss;
    auto t0 = Clock::now();
    for (int s = 0; s < steps; ++s) {
      size_t i = (*next)++ % bx.size();
      opt->zero_grad();
      loss = torch::nn::functional::cross_entropy(net->forward(bx[i]), by[i]);
      loss.backward();
      opt->step();
    }
    double sec = seconds_since(t0);
    check(std::isfinite(loss.item<float>()), "cnn loss");
    return sec;
  };
  return side;
}

TorchSide torch_mlp_inference(const std::vector<std::vector<float>>& kernels, const std::vector<std::vector<float>>& biases,
                              const float* x, int64_t batch, const std::vector<int64_t>& expected, int reps,
                              int blas_threads) {
  // nn::Linear keeps its weight [out, in]: the transposes of ActorFlow's kernels.
  std::vector<torch::nn::Linear> layers;
  for (size_t l = 0; l < kernels.size(); ++l) {
    int64_t out = static_cast<int64_t>(biases[l].size());
    int64_t in = static_cast<int64_t>(kernels[l].size()) / out;
    torch::nn::Linear lin(in, out);
    torch::NoGradGuard no_grad;
    lin->weight.copy_(torch::from_blob(const_cast<float*>(kernels[l].data()), {in, out}, torch::kFloat32).t());
    lin->bias.copy_(torch::from_blob(const_cast<float*>(biases[l].data()), {out}, torch::kFloat32));
    layers.push_back(lin);
  }
  auto input = torch::from_blob(const_cast<float*>(x), {batch, 784}, torch::kFloat32).clone();
  TorchSide side;
  side.threads = thread_words() + blas_words(blas_threads) + ", NoGradGuard, Linear+relu x3 then argmax";
  side.sample = [layers, input, expected, reps, blas_threads]() mutable {
    BlasThreads blas(blas_threads);
    torch::NoGradGuard no_grad;
    torch::Tensor pred;
    auto t0 = Clock::now();
    for (int r = 0; r < reps; ++r) {
      auto h = torch::relu(layers[0]->forward(input));
      h = torch::relu(layers[1]->forward(h));
      pred = layers[2]->forward(h).argmax(-1);
    }
    double s = seconds_since(t0);
    check(pred.numel() == static_cast<int64_t>(expected.size()), "mlp inference rows");
    int64_t differ = 0;
    for (int64_t i = 0; i < pred.numel(); ++i) differ += pred[i].item<int64_t>() != expected[static_cast<size_t>(i)];
    // Float rounding may flip a near-tie; anything more is a wrong model.
    check(differ <= pred.numel() / 50, "mlp inference predictions");
    return s * 1e6 / reps;
  };
  return side;
}

}  // namespace peers
