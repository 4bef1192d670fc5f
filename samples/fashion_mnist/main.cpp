// Fashion-MNIST: --model mlp (784-256-128-10) or cnn (conv 5x5x32, pool, conv 5x5x64,
// pool, dense 1024, dropout, dense 10), built by kit/models.cpp and trained with the kit's loop.
//   fashion_mnist --model mlp --epoch_number 10
#include <actorflow/actorflow.h>

#include <iostream>

#include "kit/cluster.h"
#include "kit/device.h"
#include "kit/models.h"
#include "kit/trainer.h"

namespace af = actorflow;

int main(int argc, char** argv) {
  kit::Flags defaults = kit::fashion_mnist_defaults();
  kit::Flags f = kit::parse_flags(argc, argv, {"fashion_mnist", kit::kFashionMnistModels}, defaults);
  kit::reject_flags(f, kit::fashion_mnist_unused_flags(f.model), "to --model " + f.model);
  kit::per_model_paths(f, defaults);
  // A ps task serves its share of the variables here and exits when training is over.
  auto task = kit::start_task(f, "fashion_mnist");

  // The training images stay bytes (47 MB, not 188 MB of f32); the kit's input pipeline
  // scales each batch to the same f32 values as it reads it.
  auto data = kit::load_fashion_mnist(f.data_dir, kit::Pixels::u8);
  if (!data.ok()) {
    std::cerr << data.status().to_string() << "\n(install Debian's dataset-fashion-mnist or pass --data_dir)\n";
    return 1;
  }
  af::Graph g;
  auto placement = task->place(g);  // variables on the ps tasks when distributed
  auto on_device = kit::device_scope(g, f, task->distributed);  // --device gpu: the model on /gpu:0
  g.set_seed(f.seed);
  kit::Model m = kit::fashion_mnist_model(g, f);
  // In-graph replication builds one more tower per worker with the same function.
  auto build = [&f](af::Graph& tower_graph) { return kit::fashion_mnist_model(tower_graph, f); };
  return kit::run_main(f, g, m, *data, "fashion_mnist", nullptr, task.get(), build);
}
