// The samples' data, found where Debian's packages put it.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include <actorflow/actorflow.h>
#include <actorflow/data/dataset.h>

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
  // x: f32 [N, F], or (x_train, Pixels::u8) the images' bytes u8 [N, F], made f32 as they
  // are read (training_batches, features); y: i64 [N]
  actorflow::Tensor x_train, y_train, x_test, y_test;
  // The statistics a model standardizes its raw inputs with, in its graph (standardize):
  // then an exported model takes the raw features a user has, as training fed them.
  Standardization standardization;
};

// How a loader keeps images: f32 pixels scaled to [0, 1], or the files' bytes (u8, a
// quarter of the memory: 47 MB for Fashion-MNIST's training images instead of 188 MB),
// scaled batch by batch as the input pipeline reads them, to the same f32 values.
enum class Pixels { f32, u8 };

// Fashion-MNIST: pixels scaled to [0, 1], images flattened to 784. `train_pixels` says how
// the training images are kept; the test images are f32.
actorflow::Result<Split> load_fashion_mnist(const std::string& dir, Pixels train_pixels = Pixels::f32);
// One part of it: "train" or "t10k" (images [N, 784] as `pixels` says, labels i64 [N]).
actorflow::Result<std::pair<actorflow::Tensor, actorflow::Tensor>> load_fashion_mnist_part(const std::string& dir,
                                                                                         const std::string& part,
                                                                                         Pixels pixels);

// f32 features of x: x itself if it is f32; u8 pixels p become p / 255.0f.
actorflow::Tensor features(const actorflow::Tensor& x);

// The kit's training input pipeline over rows (x, y): from_tensors -> shuffle(all rows,
// seed) when a seed is given -> batch -> features of each batch's x (u8 pixels scaled on
// the way, never a whole f32 copy) -> prefetch(8).
actorflow::data::Dataset training_batches(const actorflow::Tensor& x, const actorflow::Tensor& y, int64_t batch_size,
                                          std::optional<uint64_t> shuffle_seed);
// Wisconsin breast cancer: a fixed seeded 80/20 split of the raw features, with the
// training split's mean and deviation in `standardization` (the model applies them).
actorflow::Result<Split> load_breast_cancer(const std::string& csv, uint64_t seed, double test_fraction = 0.2);

// (x - mean) / stddev with both as constants of x's graph, so that they are saved, exported
// and served with the model. x: f32 [?, F].
actorflow::Output standardize(const actorflow::Output& x, const Standardization& s);

}  // namespace kit
