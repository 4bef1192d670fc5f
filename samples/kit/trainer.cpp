#include "trainer.h"

#include <actorflow/data/dataset.h>
#include <actorflow/data/readers.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <set>
#include <sstream>

#include "cluster.h"
#include "progress.h"

namespace kit {

namespace af = actorflow;
namespace ad = actorflow::data;
namespace afn = actorflow::net;
namespace fs = std::filesystem;

std::unique_ptr<af::optim::Optimizer> make_optimizer(const Flags& f, af::Graph& g, const af::Output& global_step,
                                                     int64_t steps_per_epoch) {
  af::optim::Hyper lr = f.learning_rate;
  if (f.enable_lr_decay) lr = af::train::exponential_decay(f.learning_rate, global_step, steps_per_epoch, f.lr_decay_rate, true);
  (void)g;
  if (f.optimizer == "momentum") return std::make_unique<af::optim::Momentum>(lr, 0.9);
  if (f.optimizer == "adagrad") return std::make_unique<af::optim::Adagrad>(lr);
  if (f.optimizer == "adadelta") return std::make_unique<af::optim::Adadelta>(lr);
  if (f.optimizer == "adam") return std::make_unique<af::optim::Adam>(lr);
  if (f.optimizer == "ftrl") return std::make_unique<af::optim::Ftrl>(lr);
  if (f.optimizer == "rmsprop") return std::make_unique<af::optim::RMSProp>(lr);
  return std::make_unique<af::optim::GradientDescent>(lr);
}

namespace {

af::FeedDict feeds_for(Model& m, const af::Tensor& x, const af::Tensor& y, bool training) {
  af::FeedDict feeds{{m.x, x}, {m.y, y}};
  if (m.training.valid()) feeds.push_back({m.training, af::Tensor::scalar(training)});
  return feeds;
}

}  // namespace

std::string resume_message(const std::string& checkpoint, int epochs_done, int64_t step, int epoch_number) {
  std::ostringstream os;
  if (epochs_done >= epoch_number)
    os << "nothing to train: " << checkpoint << " has finished " << epochs_done << " epochs (step " << step
       << ") and --epoch_number is " << epoch_number
       << "; raise --epoch_number to train on, or use --mode train_from_scratch\n";
  else
    os << "resuming from " << checkpoint << " at epoch " << epochs_done + 1 << ", step " << step << "\n";
  return os.str();
}

afn::TrainingLoopOptions loop_options(const Flags& f) {
  afn::TrainingLoopOptions o;
  o.batch_size = f.batch_size;
  o.epochs = f.epoch_number;
  o.max_steps = f.max_steps;
  o.resume = f.mode == "train";
  o.checkpoint_dir = f.checkpoint_path;
  o.summary_dir = f.output_path;
  o.steps_to_validate = f.steps_to_validate;
  o.shuffle = f.shuffle;
  o.seed = f.seed;
  o.threads = f.threads;
  o.make_optimizer = [f](af::Graph& g, const af::Output& step, int64_t steps_per_epoch) {
    return make_optimizer(f, g, step, steps_per_epoch);
  };
  o.sync_mode = f.sync_mode == "sync" ? afn::SyncMode::sync : f.sync_mode == "ssp" ? afn::SyncMode::ssp : afn::SyncMode::async;
  o.replicas_to_aggregate = f.replicas_to_aggregate;
  o.backup_workers = f.backup_workers;
  o.staleness = f.staleness;
  o.sync_timeout_ms = f.sync_timeout_ms;
  o.clock_log = f.clock_log;
  o.startup_timeout_ms = f.startup_timeout_ms;
  o.step_timeout_ms = f.step_timeout_ms;
  o.save_checkpoint_secs = f.save_checkpoint_secs;
  o.save_checkpoint_steps = f.save_checkpoint_steps;
  o.allreduce_bucket_bytes = f.allreduce_bucket_bytes;
  o.allreduce_algorithm = *afn::parse_allreduce_algorithm(f.allreduce_algorithm);  // checked by the flag
  o.trace_path = f.trace_path;
  o.slow_step_ms = f.slow_step_ms;
  return o;
}

afn::TrainingData training_data(const Split& data) {
  return {data.x_train, data.y_train, data.x_test, data.y_test, features};
}

af::Result<TrainResult> train(af::Graph& g, Model& m, const Split& data, const Flags& f, af::optim::Optimizer* optimizer) {
  int64_t n_train = data.x_train.dim(0);
  int64_t steps_per_epoch = (n_train + f.batch_size - 1) / f.batch_size;
  af::Output step = af::train::global_step(g);
  std::unique_ptr<af::optim::Optimizer> owned;
  if (!optimizer && m.optimizers.empty()) {
    owned = make_optimizer(f, g, step, steps_per_epoch);
    optimizer = owned.get();
  }
  af::Operation train_op = af::train::minimize(m.optimizers_or(optimizer), m.loss, step);
  af::Saver saver(g);
  af::SessionOptions opts;
  opts.intra_op_threads = f.threads;
  opts.trace_path = f.trace_path;
  AF_ASSIGN_OR_RETURN(af::Session sess, af::Session::create(g, opts));
  std::string resumed_from;
  if (f.mode == "train") {
    if (auto latest = af::latest_checkpoint(f.checkpoint_path); latest.ok()) {
      AF_RETURN_IF_ERROR(saver.restore_file(sess, *latest));
      resumed_from = *latest;
    }
  }
  if (resumed_from.empty()) AF_RETURN_IF_ERROR(sess.run_init());
  std::optional<af::SummaryWriter> writer;
  if (auto w = af::SummaryWriter::create(f.output_path); w.ok()) {
    writer = std::move(*w);
    (void)writer->add_graph(g);
  } else {
    std::cerr << "summaries disabled: " << w.status().to_string() << "\n";
  }
  auto global = [&]() -> int64_t {
    auto v = sess.run({step});
    return v.ok() ? (*v)[0].item<int64_t>() : 0;
  };
  int64_t start_step = global();
  int first_epoch = resumed_from.empty() ? 0 : static_cast<int>(start_step / steps_per_epoch);
  if (!resumed_from.empty()) std::cout << resume_message(resumed_from, first_epoch, start_step, f.epoch_number) << std::flush;

  TrainResult r;
  r.epochs = first_epoch;  // a run with nothing left to train still reports the epochs done
  af::Tensor val_x = data.x_test.slice_rows(0, std::min<int64_t>(1000, data.x_test.dim(0)));
  af::Tensor val_y = data.y_test.slice_rows(0, val_x.dim(0));
  auto started = std::chrono::steady_clock::now();
  int64_t steps = start_step, examples = 0;
  int64_t first_count = 0;
  afn::SteadyRate steady(afn::kWarmupStepsPerWorker);
  bool stop = false;
  for (int epoch = first_epoch; epoch < f.epoch_number && !stop; ++epoch) {
    std::optional<uint64_t> shuffle_seed;
    if (f.shuffle) shuffle_seed = static_cast<uint64_t>(f.seed) * 1000003u + static_cast<uint64_t>(epoch);
    auto it = training_batches(data.x_train, data.y_train, f.batch_size, shuffle_seed).make_iterator();
    ProgressBar bar(epoch + 1, f.epoch_number, n_train);
    double epoch_loss = 0;
    int64_t epoch_steps = 0;
    ad::Components batch;
    while (true) {
      auto more = it->next(&batch);
      if (!more.ok()) return more.status();
      if (!*more) break;
      auto out = sess.run({m.loss}, feeds_for(m, batch[0], batch[1], true), {train_op});
      if (!out.ok()) return out.status();
      double loss = (*out)[0].element_as_double(0);
      ++steps;
      ++epoch_steps;
      epoch_loss += loss;
      examples += batch[0].dim(0);
      steady.update(steps - start_step, examples);
      if (first_count < 20) {
        r.first_loss += loss;
        ++first_count;
      }
      bar.update(batch[0].dim(0), loss);
      if (writer && steps % 10 == 0) (void)writer->add_scalar("loss", static_cast<float>(loss), steps);
      if (f.steps_to_validate > 0 && steps % f.steps_to_validate == 0) {
        double vl, va;
        AF_RETURN_IF_ERROR(afn::evaluate(sess, m, val_x, val_y, &vl, &va));
        if (writer) {
          (void)writer->add_scalar("validation/loss", static_cast<float>(vl), steps);
          (void)writer->add_scalar("validation/accuracy", static_cast<float>(va), steps);
        }
      }
      if (f.max_steps > 0 && steps >= f.max_steps) {
        stop = true;
        break;
      }
    }
    r.last_loss = epoch_steps ? epoch_loss / static_cast<double>(epoch_steps) : 0;
    double tl, ta;
    AF_RETURN_IF_ERROR(afn::evaluate(sess, m, data.x_test, data.y_test, &tl, &ta));
    std::ostringstream extra;
    extra << "test_loss " << tl << "  test_accuracy " << ta;
    bar.finish(extra.str());
    if (writer) {
      (void)writer->add_scalar("test/accuracy", static_cast<float>(ta), steps);
      (void)writer->flush();
    }
    AF_RETURN_IF_ERROR(saver.save(sess, f.checkpoint_path, steps));
    r.epochs = epoch + 1;
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  r.steady_examples_per_second = steady.per_second();
  r.steps = steps;
  r.first_loss = first_count ? r.first_loss / static_cast<double>(first_count) : 0;
  r.examples_per_second = r.seconds > 0 ? static_cast<double>(examples) / r.seconds : 0;
  AF_RETURN_IF_ERROR(afn::evaluate(sess, m, data.x_test, data.y_test, &r.test_loss, &r.test_accuracy));
  if (writer) (void)writer->close();
  // Closing writes the trace (--trace_path), whose failure is the run's.
  AF_RETURN_IF_ERROR(sess.close());
  return r;
}

namespace {

std::string row_text(const af::Tensor& t, int64_t r) {
  int64_t w = t.num_elements() / std::max<int64_t>(1, t.dim(0));
  std::ostringstream os;
  for (int64_t k = 0; k < w; ++k) os << (k ? " " : "") << t.element_as_double(r * w + k);
  return os.str();
}

}  // namespace

int run_main(const Flags& f, af::Graph& g, Model& m, const Split& data, const std::string& sample_name,
             af::optim::Optimizer* optimizer, ClusterTask* task, const std::function<Model(af::Graph&)>& build_tower) {
  if (task && task->distributed) {
    // Said in the flags' words before the library's loop says it in its own.
    std::string refused;
    if (task->training->in_graph && !build_tower) refused = "--replication in_graph: this sample cannot build its model once per tower";
    else if (task->training->in_graph && !m.optimizers.empty())
      refused = "--replication in_graph needs the loop's optimizer; this model trains its parts with optimizers of its own";
    if (!refused.empty()) {
      std::cerr << sample_name << ": " << af::invalid_argument(refused).to_string() << "\n";
      return 1;
    }
    af::Result<TrainResult> r =
        afn::train_in_cluster(g, m, training_data(data), loop_options(f), *task->training, optimizer, build_tower);
    if (!r.ok()) {
      std::cerr << sample_name << ": " << r.status().to_string() << "\n";
      return 1;
    }
    if (!task->training->is_chief) {
      std::printf("RESULT sample=%s role=worker task=%s global_step=%lld seconds=%.1f examples_per_second=%.0f "
                  "first_loss=%.4f final_loss=%.4f wire_bytes_per_step=%.0f socket_bytes_per_step=%.0f model_bytes=%lld "
                  "strategy=%s allreduce_bytes_per_step=%.0f\n",
                  sample_name.c_str(), task->training->self.c_str(), static_cast<long long>(r->steps), r->seconds,
                  r->examples_per_second, r->first_loss, r->last_loss, r->wire_bytes_per_step, r->socket_bytes_per_step,
                  static_cast<long long>(r->model_bytes), f.strategy.c_str(), r->allreduce_bytes_per_step);
      std::fflush(stdout);  // whole, before the daemon's last log lines
      return 0;
    }
    // All-reduce is synchronous by construction; its RESULT says which algorithm ran.
    const bool allreduce = f.strategy == "allreduce";
    const std::string algorithm =
        allreduce ? std::string(" allreduce_algorithm=") +
                        afn::allreduce_algorithm_name(afn::resolve_allreduce_algorithm(
                            *afn::parse_allreduce_algorithm(f.allreduce_algorithm), task->training->num_workers))
                  : std::string();
    std::printf("RESULT sample=%s model=%s role=chief replication=%s sync_mode=%s workers=%d test_accuracy=%.4f test_loss=%.4f epochs=%d "
                "steps=%lld seconds=%.1f examples_per_second=%.0f steady_examples_per_second=%.0f first_loss=%.4f final_loss=%.4f "
                "wire_bytes_per_step=%.0f socket_bytes_per_step=%.0f model_bytes=%lld strategy=%s allreduce_bytes_per_step=%.0f%s\n",
                sample_name.c_str(), f.model.c_str(), f.replication.c_str(), allreduce ? "sync" : f.sync_mode.c_str(),
                task->training->num_workers, r->test_accuracy,
                r->test_loss, r->epochs, static_cast<long long>(r->steps), r->seconds, r->examples_per_second,
                r->steady_examples_per_second,
                r->first_loss, r->last_loss, r->wire_bytes_per_step, r->socket_bytes_per_step,
                static_cast<long long>(r->model_bytes), f.strategy.c_str(), r->allreduce_bytes_per_step, algorithm.c_str());
    std::fflush(stdout);
    return 0;
  }
  std::string export_dir = f.saved_model_path + "/" + std::to_string(f.model_version);
  if (f.mode == "inference") {
    if (f.inference_test_file.empty()) {
      std::cerr << "--mode inference needs --inference_test_file\n";
      return 2;
    }
    auto x = load_inference_inputs(f.inference_test_file, f.inference_format, data.x_train.dim(1));
    if (!x.ok()) {
      std::cerr << x.status().to_string() << "\n";
      return 1;
    }
    af::SessionOptions opts;
    opts.intra_op_threads = f.threads;
    auto served = af::ServedModel::load(export_dir, opts);
    auto pred = served.ok() ? served->predict(*x) : af::Result<af::Tensor>(served.status());
    if (!pred.ok()) {
      std::cerr << pred.status().to_string() << "\n";
      return 1;
    }
    std::ofstream out(f.inference_result_file);
    for (int64_t r = 0; r < pred->dim(0); ++r) out << row_text(*pred, r) << "\n";
    std::cout << "RESULT mode=inference predictions=" << pred->dim(0) << " file=" << f.inference_result_file << "\n";
    return out ? 0 : 1;
  }
  if (f.mode == "export") {
    af::Output step = af::train::global_step(g);
    auto opt = make_optimizer(f, g, step, 1);
    (void)af::train::minimize(m.optimizers_or(optimizer ? optimizer : opt.get()), m.loss, step);
    af::Saver saver(g);
    auto sess = af::Session::create(g);
    af::Status s = sess.status();
    if (s.ok()) s = saver.restore(*sess, f.checkpoint_path);
    if (s.ok()) s = af::export_model(*sess, g, m.x, m.prediction, export_dir);
    if (!s.ok()) {
      std::cerr << s.to_string() << "\n";
      return 1;
    }
    std::cout << "RESULT mode=export path=" << export_dir << "\n";
    return 0;
  }
  auto r = train(g, m, data, f, optimizer);
  if (!r.ok()) {
    std::cerr << sample_name << ": " << r.status().to_string() << "\n";
    return 1;
  }
  std::printf("RESULT sample=%s model=%s test_accuracy=%.4f test_loss=%.4f epochs=%d steps=%lld seconds=%.1f "
              "examples_per_second=%.0f steady_examples_per_second=%.0f first_loss=%.4f final_loss=%.4f\n",
              sample_name.c_str(), f.model.c_str(), r->test_accuracy, r->test_loss, r->epochs,
              static_cast<long long>(r->steps), r->seconds, r->examples_per_second, r->steady_examples_per_second,
              r->first_loss, r->last_loss);
  return 0;
}

}  // namespace kit
