// One Fashion-MNIST training run as samples/fashion_mnist does it (the same kit, model and
// flags: pass --model mlp|cnn --device gpu --epoch_number 1 ...), then the GPU pool's
// high-water mark. scripts/gpu-check's run half times it against bench/gpu/torch_peer.py
// (gpu_mlp_epoch, gpu_cnn_epoch, gpu_*_peak_memory). Prints the sample's RESULT line and
//   GPU_PEAK_BYTES=<pool peak_bytes_in_use on gpu:0>
// or GPU_PEAK_BYTES=unavailable (<why>).
#include <actorflow/actorflow.h>
#include <actorflow/ops/cuda_info.h>
#include <actorflow/ops/gpu.h>

#include <cstdio>
#include <iostream>

#include "kit/cluster.h"
#include "kit/device.h"
#include "kit/models.h"
#include "kit/trainer.h"

namespace af = actorflow;

int main(int argc, char** argv) {
  kit::Flags defaults = kit::fashion_mnist_defaults();
  defaults.epoch_number = 1;
  kit::Flags f = kit::parse_flags(argc, argv, {"fashion_mnist", kit::kFashionMnistModels}, defaults);
  kit::reject_flags(f, kit::fashion_mnist_unused_flags(f.model), "to --model " + f.model);
  kit::per_model_paths(f, defaults);
  auto task = kit::start_task(f, "fashion_mnist");
  auto data = kit::load_fashion_mnist(f.data_dir, kit::Pixels::u8);
  if (!data.ok()) {
    std::cerr << data.status().to_string() << "\n";
    return 1;
  }
  af::Graph g;
  auto placement = task->place(g);
  auto on_device = kit::device_scope(g, f, task->distributed);  // --device gpu: the model on /gpu:0
  g.set_seed(f.seed);
  kit::Model m = kit::fashion_mnist_model(g, f);
  auto build = [&f](af::Graph& tower_graph) { return kit::fashion_mnist_model(tower_graph, f); };
  const int rc = kit::run_main(f, g, m, *data, "fashion_mnist", nullptr, task.get(), build);
  if (af::cuda_device_count() == 0) {
    std::printf("GPU_PEAK_BYTES=unavailable (no GPU)\n");
  } else if (auto s = af::gpu_memory_stats(0); !s.ok()) {
    std::printf("GPU_PEAK_BYTES=unavailable (%s)\n", s.status().to_string().c_str());
  } else {
    std::printf("GPU_PEAK_BYTES=%lld\n", static_cast<long long>(s->peak_bytes_in_use));
  }
  return rc;
}
