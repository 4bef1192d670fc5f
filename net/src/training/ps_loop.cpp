// Between-graph replication on parameter servers: every training task runs this loop on
// the same graph, with its own shard of the data.
#include <fstream>
#include <numeric>
#include <random>
#include <thread>

#include "actorflow/net/steady_rate.h"
#include "training/loop_support.h"

namespace actorflow::net {

using training::Clock;
using training::retryable;

Result<TrainResult> train_with_ps(Graph& g, TrainableModel& m, const TrainingData& data, const TrainingLoopOptions& o,
                                  TrainingTask& task, optim::Optimizer* optimizer) {
  AF_RETURN_IF_ERROR(training::check_inputs(data, o));
  std::ostream& out_s = *o.out;
  std::ostream& log = *o.log;
  const bool sync = o.sync_mode == SyncMode::sync, ssp = o.sync_mode == SyncMode::ssp;
  const int replicas =
      sync ? (o.replicas_to_aggregate > 0 ? o.replicas_to_aggregate : task.num_workers - o.backup_workers) : 1;
  if (replicas < 1) return invalid_argument("sync replication needs at least one replica per round");
  const int64_t examples_per_step = int64_t{o.batch_size} * replicas;
  const auto [steps_per_epoch, target] = training::schedule(o, data.x_train.dim(0), examples_per_step);

  // The graph: the same on every task, but for this worker's index in the sync and clock ops.
  Output step = train::global_step(g);
  std::unique_ptr<optim::Optimizer> owned;
  optimizer = training::loop_optimizer(m, optimizer, o, g, step, steps_per_epoch, owned);
  const std::vector<train::OptimizerVars> parts = m.optimizers_or(optimizer);
  Output new_step;  // the global step after this task's step
  Operation train_op;
  train::SyncReplicasOps sync_ops;
  if (sync) {
    train::SyncReplicasOptions so;
    so.replicas_to_aggregate = replicas;
    so.timeout_ms = o.sync_timeout_ms;
    sync_ops = train::sync_replicas_minimize(parts, m.loss, step, task.worker, so);
  } else {
    train_op = train::minimize(parts, m.loss, step);
    ControlDependencies after(g, {train_op});
    new_step = read_variable(step, "step_after_update");
  }
  train::WorkerTable table;
  table.device = "/job:ps/task:0/cpu:0";
  table.num_workers = task.num_workers;
  Output clock = placeholder(g, i64, Shape{}, "worker_clock_value");
  Output clock_out;
  if (ssp) {
    ControlDependencies after(g, {train_op});
    clock_out = train::worker_clock(g, table, task.worker, clock, o.staleness, o.sync_timeout_ms);
  }
  Operation done_op = train::worker_done(g, table, task.worker);
  // Polled by the chief at the end (a second at a time), so that it can restore a ps lost
  // meanwhile: the workers still training wait for that, and the chief for them.
  Output all_done = train::wait_workers_done(g, table, std::min<int64_t>(1000, o.startup_timeout_ms));
  Output clock_log = train::worker_clock_log(g, table);
  // Asked on each ps, answered here: polling it moves a bool per variable, not the model.
  Output uninitialized = report_uninitialized_variables(g);
  std::optional<Saver> saver;
  if (task.is_chief) saver.emplace(g);

  SessionOptions opts;
  opts.intra_op_threads = o.threads;
  opts.target = task.target;
  opts.shared_container = "between_graph_replication";
  opts.step_timeout_ms = o.step_timeout_ms;
  AF_ASSIGN_OR_RETURN(Session sess, Session::create(g, opts));
  const auto deadline = Clock::now() + std::chrono::milliseconds(o.startup_timeout_ms);

  std::string resumed_from;
  if (task.is_chief) {
    if (o.resume)
      if (auto latest = latest_checkpoint(o.checkpoint_dir); latest.ok()) resumed_from = *latest;
    AF_RETURN_IF_ERROR(training::wait_for(log, "the ps tasks", deadline, [&] {
      return resumed_from.empty() ? sess.run_init() : saver->restore_file(sess, resumed_from);
    }));
  } else {
    AF_RETURN_IF_ERROR(training::wait_for(log, "the chief " + task.chief + " to initialize the variables", deadline,
                                          [&] { return training::all_initialized(sess, uninitialized); }));
  }
  auto read_step = [&] { return training::read_global_step(sess, step, o); };
  AF_ASSIGN_OR_RETURN(int64_t gstep, read_step());
  const int64_t start_step = gstep;
  auto recover = [&] {
    return training::recover_cluster(sess, uninitialized, task.is_chief ? &*saver : nullptr, o, task.self);
  };
  // A lost task: wait until the cluster answers again; if a ps came back without its
  // variables, the chief restores the last checkpoint.
  const training::StepRecovery recovery{.log = &log,
                                        .self = task.self,
                                        .context = task.describe(),
                                        .awaited = "the cluster to recover",
                                        .back = "the cluster",
                                        .rejoin = [&]() -> Result<int64_t> {
                                          AF_RETURN_IF_ERROR(recover());
                                          return read_step();
                                        }};
  auto last_save = Clock::now();
  if (!resumed_from.empty()) out_s << "resuming from " << resumed_from << " at step " << gstep << std::endl;
  out_s << task.describe() << ": training to global step " << target << " (" << sync_mode_name(o.sync_mode) << ", "
        << steps_per_epoch << " steps per epoch)" << std::endl;

  std::optional<SummaryWriter> writer;
  if (task.is_chief) writer = training::chief_summaries(g, o);

  // This worker's shard: every num_workers-th record.
  const training::Shard shard = training::shard_of(data, task.worker, task.num_workers);
  const int64_t shard_rows = shard.x.dim(0);
  if (shard_rows == 0) return invalid_argument(task.describe() + " has no training records in its shard");
  std::vector<int64_t> order(static_cast<size_t>(shard_rows));
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 rng(static_cast<uint64_t>(o.seed) * 1000003u + static_cast<uint64_t>(task.worker));

  TrainResult r;
  Tensor val_x = data.x_test.slice_rows(0, std::min<int64_t>(1000, data.x_test.dim(0)));
  Tensor val_y = data.y_test.slice_rows(0, val_x.dim(0));
  auto started = Clock::now();
  const training::TrafficMark traffic0;
  // This worker's share of an epoch's steps (in sync mode each step is all of theirs).
  training::StepTally tally(sync ? steps_per_epoch : steps_per_epoch / std::max(1, task.num_workers));
  const int64_t save_every = o.save_checkpoint_steps > 0 ? o.save_checkpoint_steps : steps_per_epoch;
  int64_t next_save = (gstep / save_every + 1) * save_every;
  int64_t next_report = gstep + std::max<int64_t>(1, target / 10);
  // The cluster's warm-up in global steps: each worker's first steps (a sync step takes
  // `replicas` of them).
  SteadyRate steady(kWarmupStepsPerWorker * task.num_workers / replicas);
  while (gstep < target) {
    if (o.shuffle) std::shuffle(order.begin(), order.end(), rng);
    for (size_t b = 0; b < order.size() && gstep < target; b += static_cast<size_t>(o.batch_size)) {
      size_t e = std::min(order.size(), b + static_cast<size_t>(o.batch_size));
      FeedDict feeds{{m.x, training::batch_features(data, training::gather_rows(shard.x, order, b, e))},
                     {m.y, training::gather_rows(shard.y, order, b, e)}};
      if (m.training.valid()) feeds.push_back({m.training, Tensor::scalar(true)});
      if (o.slow_step_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(o.slow_step_ms));
      std::vector<Fetch> fetches{m.loss};
      if (sync) {
        feeds.push_back({sync_ops.local_step, Tensor::scalar<int64_t>(gstep)});
        fetches.push_back(task.is_chief ? sync_ops.chief_step : sync_ops.worker_step);
      } else {
        fetches.push_back(new_step);
        if (ssp) {
          feeds.push_back({clock, Tensor::scalar<int64_t>(tally.local_steps() + 1)});
          fetches.push_back(clock_out);
        }
      }
      auto out = sess.run(fetches, feeds);
      if (!out.ok()) {
        AF_RETURN_IF_ERROR(recovery.after(out.status(), gstep));
        continue;
      }
      const double loss = tally.add(*out, e - b, gstep);
      if (!task.is_chief) continue;
      steady.update(gstep - start_step, (gstep - start_step) * examples_per_step);
      if (writer && tally.local_steps() % 10 == 0) (void)writer->add_scalar("loss", static_cast<float>(loss), gstep);
      if (o.steps_to_validate > 0 && tally.local_steps() % o.steps_to_validate == 0) {
        double vl, va;
        Status validated = evaluate(sess, m, val_x, val_y, &vl, &va);
        if (!validated.ok() && retryable(validated)) continue;  // the next step finds out and recovers
        AF_RETURN_IF_ERROR(validated);
        if (writer) {
          (void)writer->add_scalar("validation/loss", static_cast<float>(vl), gstep);
          (void)writer->add_scalar("validation/accuracy", static_cast<float>(va), gstep);
        }
      }
      if (gstep >= next_report) {
        training::report_progress(o, gstep, target, tally.recent_loss(), started);
        next_report = gstep + std::max<int64_t>(1, target / 10);
      }
      if ((gstep >= next_save || training::save_period_passed(o, last_save)) && gstep < target) {
        Status saved = saver->save(sess, o.checkpoint_dir, gstep);
        if (!saved.ok() && retryable(saved)) continue;  // the next step finds out and recovers
        AF_RETURN_IF_ERROR(saved);
        next_save = (gstep / save_every + 1) * save_every;
        last_save = Clock::now();
      }
    }
  }
  r.seconds = std::chrono::duration<double>(Clock::now() - started).count();
  r.steady_examples_per_second = steady.per_second();
  training::note_traffic(r, traffic0, tally.local_steps(), g);
  AF_RETURN_IF_ERROR(training::wait_for(log, "the ps tasks to take this worker's end of training",
                                        Clock::now() + std::chrono::milliseconds(o.startup_timeout_ms),
                                        [&] { return sess.run({}, {}, {done_op}).status(); }));
  tally.finish(r, gstep, steps_per_epoch);
  if (!task.is_chief) return r;

  // The cluster's throughput: every worker's examples while the chief trained.
  r.examples_per_second = r.seconds > 0 ? static_cast<double>((gstep - start_step) * examples_per_step) / r.seconds : 0;
  const auto done_by = Clock::now() + std::chrono::milliseconds(o.startup_timeout_ms);
  int64_t n_done = 0;
  while (true) {
    auto finished = sess.run({all_done});
    if (finished.ok()) n_done = (*finished)[0].item<int64_t>();
    else if (!retryable(finished.status()) || Clock::now() >= done_by) return finished.status();
    if (n_done >= task.num_workers || Clock::now() >= done_by) break;
    // Workers still training may be waiting for a ps that came back empty: only the chief
    // restores it (recover), and this chief has finished its own steps.
    AF_RETURN_IF_ERROR(recover());
  }
  // The evaluation and the final checkpoint read every variable: restore a ps lost since.
  AF_RETURN_IF_ERROR(recover());
  if (n_done < task.num_workers)
    log << "only " << n_done << " of " << task.num_workers << " workers reported the end of training within "
        << o.startup_timeout_ms << " ms" << std::endl;
  if (!o.clock_log.empty()) {
    auto records = sess.run({clock_log});
    if (!records.ok()) return records.status();
    std::ofstream file(o.clock_log);
    const Tensor& t = (*records)[0];
    for (int64_t i = 0; i < t.dim(0); ++i)
      file << t.data<int64_t>()[3 * i] << " " << t.data<int64_t>()[3 * i + 1] << " " << t.data<int64_t>()[3 * i + 2]
           << "\n";
    if (!file) return Status(Code::internal, "cannot write the clock log " + o.clock_log);
  }
  if (sync) {
    auto stale = sess.run({sync_ops.num_stale});
    if (stale.ok()) out_s << "sync: " << (*stale)[0].item<int64_t>() << " stale gradients dropped" << std::endl;
  }
  AF_RETURN_IF_ERROR(training::chief_finish(sess, m, data, o, task, *saver, writer, gstep, r));
  return r;
}

}  // namespace actorflow::net
