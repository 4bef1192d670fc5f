// The samples' data, found where Debian's packages put it.
#pragma once
#include <cstdint>
#include <string>

#include <actorflow/actorflow.h>

namespace kit {

inline const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";
inline const char* kBreastCancerCsv = "/usr/lib/python3/dist-packages/sklearn/datasets/data/breast_cancer.csv";

// Per-feature statistics of a training split, f32 [F] each; empty tensors when the loader
// does not standardize.
struct Standardization {
  actorflow::Tensor mean, stddev;
  bool empty() const { return !mean.valid(); }
};

struct Split {
  actorflow::Tensor x_train, y_train, x_test, y_test;  // x: f32 [N, F]; y: i64 [N]
  // The statistics a model standardizes its raw inputs with, in its graph (standardize):
  // then an exported model takes the raw features a user has, as training fed them.
  Standardization standardization;
};

// Fashion-MNIST: pixels scaled to [0, 1], images flattened to 784.
actorflow::Result<Split> load_fashion_mnist(const std::string& dir);
// Wisconsin breast cancer: a fixed seeded 80/20 split of the raw features, with the
// training split's mean and deviation in `standardization` (the model applies them).
actorflow::Result<Split> load_breast_cancer(const std::string& csv, uint64_t seed, double test_fraction = 0.2);

// (x - mean) / stddev with both as constants of x's graph, so that they are saved, exported
// and served with the model. x: f32 [?, F].
actorflow::Output standardize(const actorflow::Output& x, const Standardization& s);

}  // namespace kit
