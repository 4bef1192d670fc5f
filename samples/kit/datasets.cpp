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

af::Result<af::Tensor> pixels(const std::string& path) {
  AF_ASSIGN_OR_RETURN(af::Tensor raw, ad::read_idx(path));
  if (raw.rank() != 3 || raw.dtype() != af::u8) return af::invalid_argument("'" + path + "' is not an image IDX file");
  int64_t n = raw.dim(0), f = raw.dim(1) * raw.dim(2);
  af::Tensor x(af::f32, {n, f});
  const uint8_t* p = raw.data<uint8_t>();
  float* q = x.data<float>();
  for (int64_t i = 0; i < n * f; ++i) q[i] = static_cast<float>(p[i]) / 255.0f;
  return x;
}

af::Result<af::Tensor> labels(const std::string& path) {
  AF_ASSIGN_OR_RETURN(af::Tensor raw, ad::read_idx(path));
  if (raw.rank() != 1 || raw.dtype() != af::u8) return af::invalid_argument("'" + path + "' is not a label IDX file");
  af::Tensor y(af::i64, {raw.dim(0)});
  for (int64_t i = 0; i < raw.dim(0); ++i) y.data<int64_t>()[i] = raw.data<uint8_t>()[i];
  return y;
}

}  // namespace

af::Result<Split> load_fashion_mnist(const std::string& dir) {
  Split s;
  AF_ASSIGN_OR_RETURN(s.x_train, pixels(dir + "/train-images-idx3-ubyte.gz"));
  AF_ASSIGN_OR_RETURN(s.y_train, labels(dir + "/train-labels-idx1-ubyte.gz"));
  AF_ASSIGN_OR_RETURN(s.x_test, pixels(dir + "/t10k-images-idx3-ubyte.gz"));
  AF_ASSIGN_OR_RETURN(s.y_test, labels(dir + "/t10k-labels-idx1-ubyte.gz"));
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
