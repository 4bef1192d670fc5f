#include "allreduce_trainer.h"

#include "step_util.h"

#include "actorflow/log_time.h"
#include "actorflow/net/tcp_bytes.h"
#include "progress.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <deque>
#include <iostream>
#include <numeric>
#include <optional>
#include <random>
#include <thread>

namespace kit {

namespace af = actorflow;
namespace afn = actorflow::net;
using Clock = std::chrono::steady_clock;

af::Result<TrainResult> train_allreduce(af::Graph& g, Model& m, const Split& data, const Flags& f, ClusterTask& task,
                                        af::optim::Optimizer* optimizer) {
  const int n = task.num_workers;
  const int64_t examples_per_step = int64_t{f.batch_size} * n;
  const int64_t steps_per_epoch = std::max<int64_t>(1, (data.x_train.dim(0) + examples_per_step - 1) / examples_per_step);
  int64_t target = int64_t{f.epoch_number} * steps_per_epoch;
  if (f.max_steps > 0) target = std::min(target, f.max_steps);

  // The graph: the same on every worker. Gradients in buckets, each all-reduced as soon
  // as its last gradient exists; each variable's update reads its bucket's mean.
  af::Output step = af::train::global_step(g);
  std::unique_ptr<af::optim::Optimizer> owned;
  if (!optimizer && m.optimizers.empty()) {
    owned = make_optimizer(f, g, step, steps_per_epoch);
    optimizer = owned.get();
  }
  af::train::AllReduceOptions ao;
  ao.bucket_bytes = f.allreduce_bucket_bytes;
  af::Operation train_op = af::train::allreduce_minimize(optimizers_of(m, optimizer), m.loss, step, ao);
  af::Output new_step;
  {
    af::ControlDependencies after(g, {train_op});
    new_step = af::read_variable(step, "step_after_update");
  }
  // Made after every variable (the optimizer's slots too): all of them start as rank 0's.
  af::Operation sync_op = af::train::broadcast_variables(g);
  std::optional<af::Saver> saver;
  if (task.is_chief) saver.emplace(g);
  const auto buckets = af::train::allreduce_buckets(g);

  afn::GlooGroupOptions go;
  go.rank = task.worker;
  go.size = n;
  go.store = task.member_daemons.front();
  go.space = "allreduce";
  go.member_names = task.members;
  go.member_daemons = task.member_daemons;
  go.listen_host = task.member_daemons[static_cast<size_t>(task.worker)].host;
  // Below the step's own deadline, so that a survivor's step fails with the group's
  // error (which names the member lost) rather than the session's.
  go.timeout_ms = std::max<int64_t>(1, f.step_timeout_ms * 3 / 4);
  AF_ASSIGN_OR_RETURN(auto group, afn::GlooGroup::create(go));

  af::SessionOptions opts;
  opts.intra_op_threads = f.threads;
  opts.step_timeout_ms = f.step_timeout_ms;
  opts.collective_group = group;
  if (!f.trace_path.empty())
    opts.trace_path = task.is_chief ? f.trace_path : f.trace_path + ".worker" + std::to_string(task.worker);
  AF_ASSIGN_OR_RETURN(af::Session sess, af::Session::create(g, opts));
  AF_RETURN_IF_ERROR(sess.run_init());

  // Forms the group and makes every replica the chief's: its last checkpoint (a restart
  // resumes there), or its fresh initial values. Returns the global step.
  std::string resumed_from;
  auto join = [&]() -> af::Result<int64_t> {
    const auto deadline = Clock::now() + std::chrono::milliseconds(f.startup_timeout_ms);
    af::Status last;
    for (int attempt = 0; attempt < 1000 && Clock::now() < deadline; ++attempt) {
      std::cerr << af::log_time() << " " << task.self << ": forming the all-reduce group of " << n << " workers" << std::endl;
      last = group->form(deadline);
      if (!last.ok()) break;
      if (task.is_chief && f.mode == "train") {
        if (auto latest = af::latest_checkpoint(f.checkpoint_path); latest.ok()) {
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
      std::cerr << af::log_time() << " " << task.self << ": the broadcast of the chief's values failed (" << last.to_string()
                << "); forming the group again" << std::endl;
    }
    return af::Status(af::Code::deadline_exceeded, "gave up forming the all-reduce group within --startup_timeout_ms " +
                                                       std::to_string(f.startup_timeout_ms) + ": " + last.message());
  };
  AF_ASSIGN_OR_RETURN(int64_t gstep, join());
  const int64_t start_step = gstep;
  if (!resumed_from.empty()) std::cout << "resuming from " << resumed_from << " at step " << gstep << std::endl;
  std::cout << task.describe() << ": training to global step " << target << " (allreduce over " << n << " workers, "
            << buckets.size() << " gradient bucket(s), " << steps_per_epoch << " steps per epoch)" << std::endl;

  std::optional<af::SummaryWriter> writer;
  if (task.is_chief) {
    if (auto w = af::SummaryWriter::create(f.output_path); w.ok()) {
      writer = std::move(*w);
      (void)writer->add_graph(g);
    } else {
      std::cerr << "summaries disabled: " << w.status().to_string() << "\n";
    }
  }

  std::vector<int64_t> mine;
  for (int64_t r = task.worker; r < data.x_train.dim(0); r += n) mine.push_back(r);
  if (mine.empty()) return af::invalid_argument(task.describe() + " has no training records in its shard");
  af::Tensor xs = gather_rows(data.x_train, mine, 0, mine.size());
  af::Tensor ys = gather_rows(data.y_train, mine, 0, mine.size());
  std::vector<int64_t> order(mine.size());
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 rng(static_cast<uint64_t>(f.seed) * 1000003u + static_cast<uint64_t>(task.worker));

  TrainResult r;
  auto started = Clock::now();
  // Per socket: a connection that closes meanwhile (a store client's) must not take its
  // bytes away from the sum.
  const auto tcp0 = afn::tcp_socket_bytes();
  const uint64_t reduced0 = group->bytes_sent();
  int64_t local_steps = 0, examples = 0, first_count = 0;
  RecentLoss recent(steps_per_epoch);
  // The chief checkpoints every epoch (or --save_checkpoint_steps) and every
  // --save_checkpoint_secs: what a restart after a lost worker goes back to.
  const int64_t save_every = f.save_checkpoint_steps > 0 ? f.save_checkpoint_steps : steps_per_epoch;
  int64_t next_save = (gstep / save_every + 1) * save_every;
  int64_t next_report = gstep + std::max<int64_t>(1, target / 10);
  auto last_save = Clock::now();
  SteadyRate steady(kWarmupStepsPerWorker);
  while (gstep < target) {
    if (f.shuffle) std::shuffle(order.begin(), order.end(), rng);
    for (size_t b = 0; b < order.size() && gstep < target; b += static_cast<size_t>(f.batch_size)) {
      size_t e = std::min(order.size(), b + static_cast<size_t>(f.batch_size));
      af::FeedDict feeds{{m.x, features(gather_rows(xs, order, b, e))}, {m.y, gather_rows(ys, order, b, e)}};
      if (m.training.valid()) feeds.push_back({m.training, af::Tensor::scalar(true)});
      if (f.slow_step_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(f.slow_step_ms));
      auto out = sess.run({m.loss, new_step}, feeds);
      if (!out.ok() && retryable(out.status())) {
        std::cerr << af::log_time() << " " << task.self << ": the step at global step " << gstep << " failed ("
                  << out.status().to_string() << "); waiting for the group to form again" << std::endl;
        AF_ASSIGN_OR_RETURN(gstep, join());
        std::cerr << af::log_time() << " " << task.self << ": the group is back at global step " << gstep
                  << (resumed_from.empty() ? std::string() : " (restored " + resumed_from + ")") << std::endl;
        next_save = (gstep / save_every + 1) * save_every;
        continue;
      }
      if (!out.ok()) return out.status().with_context(task.describe() + " at global step " + std::to_string(gstep));
      double loss = (*out)[0].element_as_double(0);
      gstep = (*out)[1].item<int64_t>();
      ++local_steps;
      examples += static_cast<int64_t>(e - b);
      if (first_count < 20) {
        r.first_loss += loss;
        ++first_count;
      }
      recent.add(loss);
      steady.update(gstep - start_step, (gstep - start_step) * examples_per_step);
      if (!task.is_chief) continue;
      if (writer && local_steps % 10 == 0) (void)writer->add_scalar("loss", static_cast<float>(loss), gstep);
      if (gstep >= next_report) {
        char at[32];
        std::snprintf(at, sizeof at, "%.2f", std::chrono::duration<double>(Clock::now() - started).count());
        std::cout << "global step " << gstep << "/" << target << "  loss " << recent.mean()
                  << "  (" << at << " s)" << std::endl;
        next_report = gstep + std::max<int64_t>(1, target / 10);
      }
      bool periodic = Clock::now() - last_save >= std::chrono::milliseconds(static_cast<int64_t>(f.save_checkpoint_secs * 1000));
      if ((gstep >= next_save || periodic) && gstep < target) {
        AF_RETURN_IF_ERROR(saver->save(sess, f.checkpoint_path, gstep));
        next_save = (gstep / save_every + 1) * save_every;
        last_save = Clock::now();
      }
    }
  }
  r.seconds = std::chrono::duration<double>(Clock::now() - started).count();
  const afn::TcpBytes sent = afn::tcp_bytes_between(tcp0, afn::tcp_socket_bytes());
  r.model_bytes = model_bytes(g);
  // What this worker put on the wire per step (TCP bytes its peers acknowledged), the
  // all-reduce's share of 2 (n - 1) / n of the model and the rest (the daemons' beats).
  if (local_steps > 0) {
    r.wire_bytes_per_step = static_cast<double>(sent.acked) / static_cast<double>(local_steps);
    r.allreduce_bytes_per_step = static_cast<double>(group->bytes_sent() - reduced0) / static_cast<double>(local_steps);
  }
  r.steps = gstep;
  r.epochs = static_cast<int>(gstep / steps_per_epoch);
  r.first_loss = first_count ? r.first_loss / static_cast<double>(first_count) : 0;
  r.last_loss = recent.mean();
  r.examples_per_second = r.seconds > 0 ? static_cast<double>(examples) / r.seconds : 0;
  r.steady_examples_per_second = steady.per_second(gstep - start_step, (gstep - start_step) * examples_per_step);
  if (!task.is_chief) return r;
  // Every replica holds the same weights: the chief's evaluation is the cluster's.
  r.examples_per_second = r.seconds > 0 ? static_cast<double>((gstep - start_step) * examples_per_step) / r.seconds : 0;
  AF_RETURN_IF_ERROR(evaluate(sess, m, data.x_test, data.y_test, &r.test_loss, &r.test_accuracy));
  AF_RETURN_IF_ERROR(saver->save(sess, f.checkpoint_path, gstep));
  if (writer) {
    (void)writer->add_scalar("test/accuracy", static_cast<float>(r.test_accuracy), gstep);
    (void)writer->close();
  }
  return r;
}

}  // namespace kit
