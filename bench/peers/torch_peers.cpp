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
  auto sample = [a, b, elements, reps] {
    torch::NoGradGuard no_grad;
    at::Tensor c;
    auto t0 = Clock::now();
    for (int r = 0; r < reps; ++r) c = *a + *b;
    double s = seconds_since(t0);
    check(c[elements - 1].item<float>() == 3.0f, "add");
    return 3.0 * 4.0 * static_cast<double>(elements) * reps / s / 1e9;
  };
  return {sample, thread_words() + ", a + b (allocates the result)"};
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
  side.threads = "libtorch intra-op threads=" + std::to_string(at::get_num_threads()) + ", OpenBLAS threads from OPENBLAS_NUM_THREADS";
  side.sample = [net, opt, bx, by, steps, next] {
    auto t0 = std::chrono::steady_clock::now();
    for (int s = 0; s < steps; ++s) {
      size_t i = (*next)++ % bx.size();
      opt->zero_grad();
      auto loss = torch::nn::functional::cross_entropy(net->forward(bx[i]), by[i]);
      loss.backward();
      opt->step();
    }
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  return side;
}

}  // namespace peers
