// Model builders shared by the samples and the benchmarks, so a benchmark measures the
// very graph the sample trains.
#pragma once
#include <string>
#include <vector>

#include "flags.h"
#include "trainer.h"

namespace kit {

// Fashion-MNIST's models (x: f32 [?, 784], y: i64 [?]):
//   "mlp": dense layers of f.network() (ReLU; batch norm and dropout by flag), dense 10;
//   "cnn": conv 5x5x32, pool, conv 5x5x64, pool, dense 1024, dropout, dense 10.
// Seeds from f.seed; dropout keeps f.dropout_keep_prob.
inline const std::vector<std::string> kFashionMnistModels = {"mlp", "cnn"};
Model fashion_mnist_model(actorflow::Graph& g, const Flags& f);
// samples/fashion_mnist's defaults: the MLP 784-256-128-10, Adam 1e-3 decayed 0.8x per
// epoch, batch 64, 10 epochs, Debian's data set.
Flags fashion_mnist_defaults();
// The flags a Fashion-MNIST model does not use (to reject, not ignore).
std::vector<std::string> fashion_mnist_unused_flags(const std::string& model);

// An MLP body: for each width of f.network(), dense + ReLU, then batch norm and dropout
// when the flags enable them. Layers are named dense1, bn1, dropout1, ...
actorflow::Output mlp_layers(actorflow::Output x, const Flags& f, const actorflow::Output& training);

}  // namespace kit
