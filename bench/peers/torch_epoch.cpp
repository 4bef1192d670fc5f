// The libtorch child of the peak_rss case (bench/training.cpp): one epoch of the
// Fashion-MNIST MLP of mlp_training (784-256-128-10, SGD 0.1, batch 64, loss.item() every
// step) as a libtorch user writes it. The training set is loaded once, as
// torch::data::datasets::MNIST loads it: the images read into a uint8 tensor, then
// `.to(torch::kFloat32).div_(255)` (188 MB of f32, the uint8 tensor freed), labels to
// int64; Debian ships the files gzip'd, so zlib reads them straight into the tensors. The
// batches are consecutive row ranges of the data set (views, as mlp_training's). Links
// libtorch alone. Prints its peak RSS (VmHWM) in KiB, then exits.
#include <torch/torch.h>
#include <zlib.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <stdexcept>
#include <string>

namespace {

const char* kDir = "/usr/share/datasets/fashion-mnist";

long peak_rss_kib() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::stol(line.substr(6));
  return -1;
}

// An IDX file of uint8 data, its big-endian dims after the magic; `dims` as expected.
torch::Tensor read_idx_u8(const std::string& path, std::vector<int64_t> dims) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) throw std::runtime_error("cannot open " + path);
  auto need = [&](void* dst, size_t n) {
    if (gzread(f, dst, static_cast<unsigned>(n)) != static_cast<int>(n)) {
      gzclose(f);
      throw std::runtime_error(path + " is truncated");
    }
  };
  unsigned char head[4 + 4 * 3];
  const size_t header = 4 + 4 * dims.size();
  need(head, header);
  for (size_t d = 0; d < dims.size(); ++d) {
    const unsigned char* o = head + 4 + 4 * d;
    const int64_t v = (int64_t{o[0]} << 24) | (int64_t{o[1]} << 16) | (int64_t{o[2]} << 8) | o[3];
    if (head[3] != dims.size() || v != dims[d]) {
      gzclose(f);
      throw std::runtime_error(path + " does not hold the expected dims");
    }
  }
  auto t = torch::empty(dims, torch::kByte);
  need(t.data_ptr(), static_cast<size_t>(t.numel()));
  gzclose(f);
  return t;
}

struct Net : torch::nn::Module {
  Net() {
    fc1 = register_module("fc1", torch::nn::Linear(784, 256));
    fc2 = register_module("fc2", torch::nn::Linear(256, 128));
    fc3 = register_module("fc3", torch::nn::Linear(128, 10));
  }
  torch::Tensor forward(torch::Tensor x) { return fc3->forward(torch::relu(fc2->forward(torch::relu(fc1->forward(x))))); }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr}, fc3{nullptr};
};

}  // namespace

int main() {
  const char* e = std::getenv("BENCH_THREADS");
  at::set_num_threads(e && std::atoi(e) > 0 ? std::atoi(e) : 2);
  try {
    // As torch::data::datasets::MNIST (torch/csrc/api/src/data/datasets/mnist.cpp).
    torch::Tensor images =
        read_idx_u8(std::string(kDir) + "/train-images-idx3-ubyte.gz", {60000, 28, 28}).to(torch::kFloat32).div_(255);
    torch::Tensor targets = read_idx_u8(std::string(kDir) + "/train-labels-idx1-ubyte.gz", {60000}).to(torch::kInt64);
    torch::Tensor x = images.view({60000, 784});
    auto net = std::make_shared<Net>();
    torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.1));
    const int64_t batch = 64, n = x.size(0);
    float last = NAN;
    for (int64_t b = 0; b < n; b += batch) {
      const int64_t len = std::min(batch, n - b);
      opt.zero_grad();
      auto loss = torch::nn::functional::cross_entropy(net->forward(x.narrow(0, b, len)), targets.narrow(0, b, len));
      loss.backward();
      opt.step();
      last = loss.item<float>();
    }
    if (!std::isfinite(last)) throw std::runtime_error("the last loss is not finite");
  } catch (const std::exception& ex) {
    std::fprintf(stderr, "peak_rss_libtorch: %s\n", ex.what());
    return 1;
  }
  std::printf("%ld\n", peak_rss_kib());
  return 0;
}
