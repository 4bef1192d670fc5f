// Wisconsin breast cancer (Debian's python3-sklearn breast_cancer.csv), a fixed seeded
// 80/20 split; --model lr (logistic regression) or dnn (--model_network "128 32 8").
//   cancer_classifier --model dnn --epoch_number 30
#include <actorflow/actorflow.h>

#include <iostream>

#include "kit/cluster.h"
#include "kit/device.h"
#include "kit/models.h"
#include "kit/trainer.h"

namespace af = actorflow;
namespace L = actorflow::layers;

int main(int argc, char** argv) {
  kit::Flags defaults = kit::sample_defaults("cancer_classifier");
  defaults.model = "dnn";
  defaults.optimizer = "adam";
  defaults.learning_rate = 0.01;
  defaults.batch_size = 32;
  defaults.epoch_number = 30;
  defaults.steps_to_validate = 50;
  defaults.data_dir = kit::kBreastCancerCsv;
  kit::Flags f = kit::parse_flags(argc, argv, {"cancer_classifier", {"lr", "dnn"}}, defaults);
  // Logistic regression has no hidden layers for these to shape.
  if (f.model == "lr")
    kit::reject_flags(f, {"--model_network", "--enable_bn", "--enable_dropout", "--dropout_keep_prob"}, "to --model lr");
  kit::per_model_paths(f, defaults);
  // A ps task serves its share of the variables here and exits when training is over.
  auto task = kit::start_task(f, "cancer_classifier");

  auto data = kit::load_breast_cancer(f.data_dir, static_cast<uint64_t>(f.seed));
  if (!data.ok()) {
    std::cerr << data.status().to_string() << "\n(install Debian's python3-sklearn or pass --data_dir)\n";
    return 1;
  }
  af::Graph g;
  auto placement = task->place(g);  // variables on the ps tasks when distributed
  auto on_device = kit::device_scope(g, f, task->distributed);  // --device gpu: the model on /gpu:0
  g.set_seed(f.seed);
  // The model, as a function so that in-graph replication can build a tower per worker.
  auto build = [&](af::Graph& g) {
    kit::Model m;
    int64_t nf = data->x_train.dim(1);
    m.x = af::placeholder(g, af::f32, {-1, nf}, "x");
    m.y = af::placeholder(g, af::i64, {-1}, "y");
    m.training = af::placeholder_with_default(af::constant(g, af::Tensor::scalar(false)), af::Shape{}, "training");
    // x takes raw features; the training split's statistics are constants of the graph, so
    // that the export standardizes what inference feeds just as training did.
    af::Output xs = kit::standardize(m.x, data->standardization);
    af::Output h = f.model == "dnn" ? kit::mlp_layers(xs, f, m.training) : xs;
    auto logit = af::reshape(L::dense(h, 1, {}, "logit"), {-1});
    auto labels = af::cast(m.y, af::f32);
    m.loss = af::mean(af::sigmoid_cross_entropy_with_logits(logit, labels));
    auto predicted = af::cast(af::greater(logit, af::scalar_like(g, af::f32, 0.0)), af::f32);
    m.accuracy = af::mean(af::cast(af::equal(predicted, labels), af::f32), {}, false);
    m.prediction = af::sigmoid(logit, "probability");
    return m;
  };
  kit::Model m = build(g);
  return kit::run_main(f, g, m, *data, "cancer_classifier", nullptr, task.get(), build);
}
