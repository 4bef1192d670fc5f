// The samples' data, found where Debian's packages put it.
#pragma once
#include <cstdint>
#include <string>

#include <actorflow/tensor.h>

namespace kit {

inline const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";
inline const char* kBreastCancerCsv = "/usr/lib/python3/dist-packages/sklearn/datasets/data/breast_cancer.csv";

struct Split {
  actorflow::Tensor x_train, y_train, x_test, y_test;  // x: f32 [N, F]; y: i64 [N]
};

// Fashion-MNIST: pixels scaled to [0, 1], images flattened to 784.
actorflow::Result<Split> load_fashion_mnist(const std::string& dir);
// Wisconsin breast cancer: a fixed seeded 80/20 split; features standardized with the
// training split's mean and deviation.
actorflow::Result<Split> load_breast_cancer(const std::string& csv, uint64_t seed, double test_fraction = 0.2);

}  // namespace kit
