#include "datasets.h"

#include <actorflow/data/readers.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

namespace kit {

namespace af = actorflow;
namespace ad = actorflow::data;

namespace {

// The images of an IDX file as [N, rows x cols]: the file's bytes (a view, no copy) or
// f32 scaled to [0, 1].
af::Result<af::Tensor> pixels(const std::string& path, Pixels kind) {
  AF_ASSIGN_OR_RETURN(af::Tensor raw, ad::read_idx(path));
  if (raw.rank() != 3 || raw.dtype() != af::u8) return af::invalid_argument("'" + path + "' is not an image IDX file");
  int64_t n = raw.dim(0), f = raw.dim(1) * raw.dim(2);
  AF_ASSIGN_OR_RETURN(af::Tensor flat, raw.reshaped(af::Shape{n, f}));
  return kind == Pixels::u8 ? flat : features(flat);
}

af::Result<af::Tensor> labels(const std::string& path) {
  AF_ASSIGN_OR_RETURN(af::Tensor raw, ad::read_idx(path));
  if (raw.rank() != 1 || raw.dtype() != af::u8) return af::invalid_argument("'" + path + "' is not a label IDX file");
  af::Tensor y(af::i64, {raw.dim(0)});
  for (int64_t i = 0; i < raw.dim(0); ++i) y.data<int64_t>()[i] = raw.data<uint8_t>()[i];
  return y;
}

}  // namespace

af::Tensor features(const af::Tensor& x) {
  if (x.dtype() != af::u8) return x;
  af::Tensor out(af::f32, x.shape());
  const uint8_t* p = x.data<uint8_t>();
  float* q = out.data<float>();
  for (int64_t i = 0, n = x.num_elements(); i < n; ++i) q[i] = static_cast<float>(p[i]) / 255.0f;
  return out;
}

ad::Dataset training_batches(const af::Tensor& x, const af::Tensor& y, int64_t batch_size,
                             std::optional<uint64_t> shuffle_seed) {
  auto ds = ad::Dataset::from_tensors({x, y});
  if (shuffle_seed) ds = ds.shuffle(x.dim(0), *shuffle_seed);
  ds = ds.batch(batch_size);
  if (x.dtype() == af::u8)
    ds = ds.map([](const ad::Components& b) -> af::Result<ad::Components> { return ad::Components{features(b[0]), b[1]}; });
  return ds.prefetch(8);
}

af::Result<std::pair<af::Tensor, af::Tensor>> load_fashion_mnist_part(const std::string& dir, const std::string& part,
                                                                      Pixels kind) {
  std::pair<af::Tensor, af::Tensor> xy;
  AF_ASSIGN_OR_RETURN(xy.first, pixels(dir + "/" + part + "-images-idx3-ubyte.gz", kind));
  AF_ASSIGN_OR_RETURN(xy.second, labels(dir + "/" + part + "-labels-idx1-ubyte.gz"));
  return xy;
}

af::Result<Split> load_fashion_mnist(const std::string& dir, Pixels train_pixels) {
  Split s;
  AF_ASSIGN_OR_RETURN(auto train, load_fashion_mnist_part(dir, "train", train_pixels));
  AF_ASSIGN_OR_RETURN(auto test, load_fashion_mnist_part(dir, "t10k", Pixels::f32));
  s.x_train = train.first;
  s.y_train = train.second;
  s.x_test = test.first;
  s.y_test = test.second;
  return s;
}

af::Result<Split> load_breast_cancer(const std::string& csv, uint64_t seed, double test_fraction) {
  // sklearn's summary line "569,30,malignant,benign" is recognised: no header, the
  // target (0 or 1) is the last column and comes back as int64.
  AF_ASSIGN_OR_RETURN(ad::CsvData d, ad::read_csv(csv));
  if (!d.labels.valid() || d.labels.dtype() != af::i64)
    return af::invalid_argument("'" + csv + "' is not sklearn's breast_cancer.csv: its last column is not a class id");
  int64_t n = d.features.dim(0), f = d.features.dim(1);
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 rng(seed);
  std::shuffle(order.begin(), order.end(), rng);
  int64_t n_test = static_cast<int64_t>(std::llround(static_cast<double>(n) * test_fraction));
  int64_t n_train = n - n_test;
  Split s;
  s.x_train = af::Tensor(af::f32, {n_train, f});
  s.x_test = af::Tensor(af::f32, {n_test, f});
  s.y_train = af::Tensor(af::i64, {n_train});
  s.y_test = af::Tensor(af::i64, {n_test});
  for (int64_t i = 0; i < n; ++i) {
    int64_t r = order[static_cast<size_t>(i)];
    bool train = i < n_train;
    af::Tensor& x = train ? s.x_train : s.x_test;
    af::Tensor& y = train ? s.y_train : s.y_test;
    int64_t k = train ? i : i - n_train;
    std::copy_n(d.features.data<float>() + r * f, f, x.data<float>() + k * f);
    y.data<int64_t>()[k] = d.labels.data<int64_t>()[r];
  }
  // Statistics of the training split only; the test split is held out of them.
  s.standardization.mean = af::Tensor(af::f32, {f});
  s.standardization.stddev = af::Tensor(af::f32, {f});
  for (int64_t c = 0; c < f; ++c) {
    double mean = 0, sq = 0;
    for (int64_t i = 0; i < n_train; ++i) mean += s.x_train.data<float>()[i * f + c];
    mean /= static_cast<double>(n_train);
    for (int64_t i = 0; i < n_train; ++i) {
      double dlt = s.x_train.data<float>()[i * f + c] - mean;
      sq += dlt * dlt;
    }
    double sd = std::sqrt(sq / static_cast<double>(n_train));
    if (sd < 1e-12) sd = 1;  // a constant feature: centred, not blown up
    s.standardization.mean.data<float>()[c] = static_cast<float>(mean);
    s.standardization.stddev.data<float>()[c] = static_cast<float>(sd);
  }
  return s;
}

af::Output standardize(const af::Output& x, const Standardization& s) {
  af::Graph& g = *x.graph();
  af::NameScope scope(g, "standardize");
  return (x - af::constant(g, s.mean, "mean")) / af::constant(g, s.stddev, "stddev");
}

}  // namespace kit
