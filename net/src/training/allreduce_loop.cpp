// All-reduce training: no ps; every training task holds the whole model in an in-process
// session, computes gradients on its shard of the data, and the graph's
// CollectiveAllReduce nodes (actorflow/collective.h) average them over every worker with
// Gloo, or with NCCL where the model is on a GPU. The group is formed through a
// rendezvous store served by the chief's daemon; every worker starts from the chief's
// values (a broadcast), and only the chief writes checkpoints and summaries. A lost
// worker fails every survivor's step (naming it) within the step timeout; everyone then
// waits for the group to form again (the lost worker restarted with the same command),
// the chief restores the last checkpoint and broadcasts it, and training goes on from
// there, as MultiWorkerMirroredStrategy resumes after a restart.
#include <numeric>
#include <random>
#include <thread>

#include "actorflow/collective.h"
#include "actorflow/log_time.h"
#include "actorflow/net/collective.h"
#include "actorflow/net/steady_rate.h"
#include "actorflow/ops/nccl_group.h"
#include "training/loop_support.h"

namespace actorflow::net {

using training::Clock;
using training::retryable;

Result<TrainResult> train_allreduce(Graph& g, TrainableModel& m, const TrainingData& data, const TrainingLoopOptions& o,
                                    TrainingTask& task, optim::Optimizer* optimizer) {
  AF_RETURN_IF_ERROR(training::check_inputs(data, o));
  std::ostream& log = *o.log;
  const int n = task.num_workers;
  if (!task.allreduce || task.member_daemons.size() != static_cast<size_t>(n))
    return invalid_argument(task.self + " is not a member of an all-reduce cluster");
  const int64_t examples_per_step = int64_t{o.batch_size} * n;
  const auto [steps_per_epoch, target] = training::schedule(o, data.x_train.dim(0), examples_per_step);

  // The graph: the same on every worker. Gradients in buckets, each all-reduced as soon
  // as its last gradient exists; each variable's update reads its bucket's mean.
  Output step = train::global_step(g);
  std::unique_ptr<optim::Optimizer> owned;
  optimizer = training::loop_optimizer(m, optimizer, o, g, step, steps_per_epoch, owned);
  train::AllReduceOptions ao;
  ao.bucket_bytes = o.allreduce_bucket_bytes;
  Operation train_op = train::allreduce_minimize(m.optimizers_or(optimizer), m.loss, step, ao);
  Output new_step;
  {
    ControlDependencies after(g, {train_op});
    new_step = read_variable(step, "step_after_update");
  }
  // Made after every variable (the optimizer's slots too): all of them start as rank 0's.
  Operation sync_op = train::broadcast_variables(g);
  std::optional<Saver> saver;
  if (task.is_chief) saver.emplace(g);
  const auto buckets = train::allreduce_buckets(g);

  GlooGroupOptions go;
  go.rank = task.worker;
  go.size = n;
  go.store = task.member_daemons.front();
  go.space = "allreduce";
  go.member_names = task.members;
  go.member_daemons = task.member_daemons;
  go.listen_host = task.member_daemons[static_cast<size_t>(task.worker)].host;
  // Below the step's own deadline, so that a survivor's step fails with the group's
  // error (which names the member lost) rather than the session's.
  go.timeout_ms = std::max<int64_t>(1, o.step_timeout_ms * 3 / 4);
  go.algorithm = o.allreduce_algorithm;
  AF_ASSIGN_OR_RETURN(auto group, GlooGroup::create(go));
  // A model on a GPU reduces there, with NCCL; the Gloo group carries NCCL's rendezvous
  // and any collective left on the host.
  std::shared_ptr<NcclGroup> nccl;
  const int gpu = training::collective_gpu(g);
  if (gpu >= 0) {
    NcclGroupOptions no;
    no.gpu = gpu;
    no.timeout_ms = go.timeout_ms;
    auto made = nccl_group(group, no);
    if (!made.ok())
      return Status(made.status().code(), task.self + ": the model's collectives are on gpu:" + std::to_string(gpu) +
                                              ", but " + made.status().message());
    nccl = *made;
  }
  auto reduced_bytes = [&] { return group->bytes_sent() + (nccl ? nccl->bytes_sent() : 0); };

  SessionOptions opts;
  opts.intra_op_threads = o.threads;
  opts.step_timeout_ms = o.step_timeout_ms;
  opts.collective_group = nccl ? std::shared_ptr<CollectiveGroup>(nccl) : std::shared_ptr<CollectiveGroup>(group);
  if (!o.trace_path.empty())
    opts.trace_path = task.is_chief ? o.trace_path : o.trace_path + ".worker" + std::to_string(task.worker);
  AF_ASSIGN_OR_RETURN(Session sess, Session::create(g, opts));
  AF_RETURN_IF_ERROR(sess.run_init());

  // Forms the group and makes every replica the chief's: its last checkpoint (a restart
  // resumes there), or its fresh initial values. Returns the global step.
  std::string resumed_from;
  auto join = [&]() -> Result<int64_t> {
    const auto deadline = Clock::now() + std::chrono::milliseconds(o.startup_timeout_ms);
    Status last;
    for (int attempt = 0; attempt < 1000 && Clock::now() < deadline; ++attempt) {
      log << log_time() << " " << task.self << ": forming the all-reduce group of " << n << " workers" << std::endl;
      last = group->form(deadline);
      if (last.ok() && nccl) last = nccl->form(deadline);
      if (!last.ok()) break;
      if (task.is_chief && o.resume) {
        if (auto latest = latest_checkpoint(o.checkpoint_dir); latest.ok()) {
          AF_RETURN_IF_ERROR(saver->restore_file(sess, *latest));
          resumed_from = *latest;
        }
      }
      last = sess.run({}, {}, {sync_op}).status();
      if (last.ok()) {
        auto v = sess.run({step});
        if (!v.ok()) return v.status();
        return (*v)[0].item<int64_t>();
      }
      if (!retryable(last)) return last;
      log << log_time() << " " << task.self << ": the broadcast of the chief's values failed (" << last.to_string()
          << "); forming the group again" << std::endl;
    }
    return Status(Code::deadline_exceeded, "gave up forming the all-reduce group within the startup timeout of " +
                                               std::to_string(o.startup_timeout_ms) + " ms: " + last.message());
  };
  AF_ASSIGN_OR_RETURN(int64_t gstep, join());
  const training::StepRecovery recovery{
      .log = &log,
      .self = task.self,
      .context = task.describe(),
      .awaited = "the group to form again",
      .back = "the group",
      .rejoin = join,
      .note = [&] { return resumed_from.empty() ? std::string() : " (restored " + resumed_from + ")"; }};
  const int64_t start_step = gstep;
  if (!resumed_from.empty()) *o.out << "resuming from " << resumed_from << " at step " << gstep << std::endl;
  *o.out << task.describe() << ": training to global step " << target << " (allreduce over " << n << " workers, "
         << buckets.size() << " gradient bucket(s)"
         << (nccl ? ", NCCL " + nccl->nccl_version() + " on gpu:" + std::to_string(gpu) : "") << ", "
         << steps_per_epoch << " steps per epoch)" << std::endl;

  std::optional<SummaryWriter> writer;
  if (task.is_chief) writer = training::chief_summaries(g, o);

  const training::Shard shard = training::shard_of(data, task.worker, n);
  if (shard.x.dim(0) == 0) return invalid_argument(task.describe() + " has no training records in its shard");
  std::vector<int64_t> order(static_cast<size_t>(shard.x.dim(0)));
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 rng(static_cast<uint64_t>(o.seed) * 1000003u + static_cast<uint64_t>(task.worker));

  TrainResult r;
  auto started = Clock::now();
  // Per socket: a connection that closes meanwhile (a store client's) must not take its
  // bytes away from the sum.
  const auto tcp0 = tcp_socket_bytes();
  const uint64_t reduced0 = reduced_bytes();
  training::StepTally tally(steps_per_epoch);
  // The chief checkpoints every epoch (or save_checkpoint_steps) and every
  // save_checkpoint_secs: what a restart after a lost worker goes back to.
  const int64_t save_every = o.save_checkpoint_steps > 0 ? o.save_checkpoint_steps : steps_per_epoch;
  int64_t next_save = (gstep / save_every + 1) * save_every;
  int64_t next_report = gstep + std::max<int64_t>(1, target / 10);
  auto last_save = Clock::now();
  SteadyRate steady(kWarmupStepsPerWorker);
  while (gstep < target) {
    if (o.shuffle) std::shuffle(order.begin(), order.end(), rng);
    for (size_t b = 0; b < order.size() && gstep < target; b += static_cast<size_t>(o.batch_size)) {
      size_t e = std::min(order.size(), b + static_cast<size_t>(o.batch_size));
      FeedDict feeds{{m.x, training::batch_features(data, training::gather_rows(shard.x, order, b, e))},
                     {m.y, training::gather_rows(shard.y, order, b, e)}};
      if (m.training.valid()) feeds.push_back({m.training, Tensor::scalar(true)});
      if (o.slow_step_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(o.slow_step_ms));
      auto out = sess.run({m.loss, new_step}, feeds);
      if (!out.ok()) {
        AF_RETURN_IF_ERROR(recovery.after(out.status(), gstep));
        next_save = (gstep / save_every + 1) * save_every;
        continue;
      }
      const double loss = tally.add(*out, e - b, gstep);
      steady.update(gstep - start_step, (gstep - start_step) * examples_per_step);
      if (!task.is_chief) continue;
      if (writer && tally.local_steps() % 10 == 0) (void)writer->add_scalar("loss", static_cast<float>(loss), gstep);
      if (gstep >= next_report) {
        training::report_progress(o, gstep, target, tally.recent_loss(), started);
        next_report = gstep + std::max<int64_t>(1, target / 10);
      }
      if ((gstep >= next_save || training::save_period_passed(o, last_save)) && gstep < target) {
        AF_RETURN_IF_ERROR(saver->save(sess, o.checkpoint_dir, gstep));
        next_save = (gstep / save_every + 1) * save_every;
        last_save = Clock::now();
      }
    }
  }
  r.seconds = std::chrono::duration<double>(Clock::now() - started).count();
  const TcpBytes sent = tcp_bytes_between(tcp0, tcp_socket_bytes());
  r.model_bytes = training::model_bytes(g);
  // What this worker put on the wire per step (TCP bytes its peers acknowledged), the
  // all-reduce's share of 2 (n - 1) / n of the model and the rest (the daemons' beats).
  if (const int64_t local_steps = tally.local_steps(); local_steps > 0) {
    r.wire_bytes_per_step = static_cast<double>(sent.acked) / static_cast<double>(local_steps);
    r.allreduce_bytes_per_step = static_cast<double>(reduced_bytes() - reduced0) / static_cast<double>(local_steps);
  }
  tally.finish(r, gstep, steps_per_epoch);
  r.steady_examples_per_second = steady.per_second();
  if (!task.is_chief) return r;
  // Every replica holds the same weights: the chief's evaluation is the cluster's.
  r.examples_per_second = r.seconds > 0 ? static_cast<double>((gstep - start_step) * examples_per_step) / r.seconds : 0;
  AF_RETURN_IF_ERROR(evaluate(sess, m, data.x_test, data.y_test, &r.test_loss, &r.test_accuracy));
  AF_RETURN_IF_ERROR(saver->save(sess, o.checkpoint_dir, gstep));
  if (writer) {
    (void)writer->add_scalar("test/accuracy", static_cast<float>(r.test_accuracy), gstep);
    (void)writer->close();
  }
  return r;
}

}  // namespace actorflow::net
