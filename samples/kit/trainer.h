// The training loop every sample shares: optimizer from flags, epochs over a shuffled,
// batched pipeline, a progress bar, validation every N steps, TensorBoard summaries, a
// checkpoint per epoch (train resumes, train_from_scratch ignores them), and the export /
// inference modes of the seeds.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <actorflow/actorflow.h>

#include "datasets.h"
#include "flags.h"
#include "inference_inputs.h"

namespace kit {

// What a sample's model exposes to the loop.
struct Model {
  actorflow::Output x;           // features placeholder [?, F]
  actorflow::Output y;           // labels placeholder [?]
  actorflow::Output training;    // bool placeholder_with_default(false), or invalid
  actorflow::Output loss;        // scalar
  actorflow::Output accuracy;    // scalar, or invalid
  actorflow::Output prediction;  // what inference writes, one row per example
  // A model trained by several optimizers lists each with the variables it trains (the
  // optimizers live as long as the loop runs); otherwise the loop trains every variable
  // with --optimizer. Either way the loop builds the train op, async or sync.
  std::vector<actorflow::train::OptimizerVars> optimizers;
};

// The optimizers that train `m`: its own, or {fallback} over every trainable variable.
std::vector<actorflow::train::OptimizerVars> optimizers_of(const Model& m, actorflow::optim::Optimizer* fallback);

struct TrainResult {
  double test_accuracy = 0;
  double test_loss = 0;
  double first_loss = 0;  // mean loss over the first steps: "does the loss fall"
  double last_loss = 0;   // mean loss over the last epoch's steps
  int epochs = 0;
  int64_t steps = 0;
  double seconds = 0;
  double examples_per_second = 0;
  // After the first kWarmupStepsPerWorker steps of each worker (progress.h); 0 when the run
  // was not longer than that.
  double steady_examples_per_second = 0;
  // Distributed: tensor bytes this task's daemon sent to and received from the others per
  // step, and the trainable variables' bytes (a worker step moves about twice the model).
  double wire_bytes_per_step = 0;
  int64_t model_bytes = 0;
  // Distributed (ps): the TCP bytes this task's sockets sent (acknowledged) and received
  // per step, frames and heartbeats included (the kernel's counters, as ss -ti reads them).
  double socket_bytes_per_step = 0;
  // --strategy allreduce: the bytes Gloo's all-reduce sent per step (2 (n - 1) / n of the
  // model on a ring); wire_bytes_per_step is then what this task's sockets sent.
  double allreduce_bytes_per_step = 0;
};

// Builds the optimizer named by --optimizer (with --enable_lr_decay).
std::unique_ptr<actorflow::optim::Optimizer> make_optimizer(const Flags& f, actorflow::Graph& g,
                                                            const actorflow::Output& global_step,
                                                            int64_t steps_per_epoch);

// Trains `m` on `data` per the flags (mode train / train_from_scratch).
actorflow::Result<TrainResult> train(actorflow::Graph& g, Model& m, const Split& data, const Flags& f,
                                     actorflow::optim::Optimizer* optimizer = nullptr);

// Evaluates mean loss and accuracy over (x, y) in batches.
actorflow::Status evaluate(actorflow::Session& sess, Model& m, const actorflow::Tensor& x, const actorflow::Tensor& y,
                           double* loss, double* accuracy);

// What `--mode train` says when it resumes from `checkpoint` (epochs_done whole epochs,
// global step `step`), or when that leaves nothing of --epoch_number to train.
std::string resume_message(const std::string& checkpoint, int epochs_done, int64_t step, int epoch_number);

struct ClusterTask;

// The sample's main for modes export and inference, and train otherwise; prints the
// RESULT line. Inference reads --inference_test_file with load_inference_inputs. With a
// distributed `task` (cluster.h), trains as that task of the cluster.
int run_main(const Flags& f, actorflow::Graph& g, Model& m, const Split& data, const std::string& sample_name,
             actorflow::optim::Optimizer* optimizer = nullptr, ClusterTask* task = nullptr,
             const std::function<Model(actorflow::Graph&)>& build_tower = {});

}  // namespace kit
