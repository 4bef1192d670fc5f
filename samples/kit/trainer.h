// The training loop every sample shares: optimizer from flags, epochs over a shuffled,
// batched pipeline, a progress bar, validation every N steps, TensorBoard summaries, a
// checkpoint per epoch (train resumes, train_from_scratch ignores them), and the export /
// inference modes of the seeds. In a cluster the samples train with the library's loops
// (actorflow/net/training_loop.h), configured from the flags here.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <actorflow/actorflow.h>
#include <actorflow/net/training_loop.h>

#include "datasets.h"
#include "flags.h"
#include "inference_inputs.h"

namespace kit {

// What a sample's model exposes to the loop: x, y, training, loss, accuracy, prediction
// and optionally its own optimizers (the library's loops train the same struct).
using Model = actorflow::net::TrainableModel;
using TrainResult = actorflow::net::TrainResult;

// Builds the optimizer named by --optimizer (with --enable_lr_decay).
std::unique_ptr<actorflow::optim::Optimizer> make_optimizer(const Flags& f, actorflow::Graph& g,
                                                            const actorflow::Output& global_step,
                                                            int64_t steps_per_epoch);

// Trains `m` on `data` per the flags (mode train / train_from_scratch).
actorflow::Result<TrainResult> train(actorflow::Graph& g, Model& m, const Split& data, const Flags& f,
                                     actorflow::optim::Optimizer* optimizer = nullptr);

// The library's loop options from the flags (--epoch_number, --mode, --sync_mode, ...),
// with make_optimizer as the optimizer factory.
actorflow::net::TrainingLoopOptions loop_options(const Flags& f);

// The split as the library's loops take it: batches of x made f32 by features().
actorflow::net::TrainingData training_data(const Split& data);

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
