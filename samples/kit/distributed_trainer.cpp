#include "distributed_trainer.h"

#include "step_util.h"

#include "actorflow/log_time.h"
#include "actorflow/net/tcp_bytes.h"
#include "progress.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <deque>
#include <fstream>
#include <iostream>
#include <numeric>
#include <map>
#include <optional>
#include <random>
#include <thread>

namespace kit {

namespace af = actorflow;
namespace afn = actorflow::net;
using Clock = std::chrono::steady_clock;

namespace {

// Runs `attempt` until it succeeds, fails with an error that waiting cannot cure, or the
// deadline passes; says once what it waits for.
af::Status wait_for(const std::string& what, Clock::time_point deadline, const std::function<af::Status()>& attempt) {
  auto pause = std::chrono::milliseconds(100);
  const auto start = Clock::now();
  auto said = Clock::time_point();
  while (true) {
    af::Status s = attempt();
    if (s.ok() || !retryable(s)) return s;
    auto now = Clock::now();
    if (now + pause > deadline)
      return af::Status(af::Code::deadline_exceeded, "gave up waiting for " + what + ": " + s.message());
    // Once at first, then every 10 s, as TF's "CreateSession still waiting for response
    // from worker": a late task is waited for, never fatal before the deadline.
    if (said == Clock::time_point() || now - said >= std::chrono::seconds(10)) {
      auto waited = std::chrono::duration_cast<std::chrono::seconds>(now - start).count();
      std::cerr << af::log_time() << (said == Clock::time_point() ? " waiting for " : " still waiting for ") << what
                << (waited > 0 ? " after " + std::to_string(waited) + " s" : std::string()) << " (" << s.message() << ")"
                << std::endl;
      said = now;
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(2000));
  }
}

// The global step, waited for like the cluster itself: reading it is a new kind of step
// whose partitions a loaded ps may register late.
af::Result<int64_t> read_global_step(af::Session& sess, const af::Output& step, const Flags& f) {
  int64_t value = 0;
  AF_RETURN_IF_ERROR(wait_for("the global step", Clock::now() + std::chrono::milliseconds(f.startup_timeout_ms), [&] {
    auto v = sess.run({step});
    if (v.ok()) value = (*v)[0].item<int64_t>();
    return v.status();
  }));
  return value;
}

// OK once no variable is missing from its ps; failed_precondition (which wait_for retries)
// naming the first missing ones while some are.
af::Status all_initialized(af::Session& sess, const af::Output& report) {
  AF_ASSIGN_OR_RETURN(auto out, sess.run({report}));
  const af::Tensor& names = out[0];
  if (names.num_elements() == 0) return af::Status::OK();
  std::string listed;
  for (int64_t i = 0; i < std::min<int64_t>(3, names.num_elements()); ++i)
    listed += (i ? ", '" : "'") + names.data<std::string>()[i] + "'";
  return af::Status(af::Code::failed_precondition, std::to_string(names.num_elements()) +
                                                       " variables are not initialized (" + listed +
                                                       (names.num_elements() > 3 ? ", ..." : "") + ")");
}

// Waits until every variable holds a value again (and `also`, when given, succeeds): the
// chief (`saver` set) restores the last checkpoint, or initializes afresh, when a ps came
// back without its share.
af::Status recover_cluster(af::Session& sess, const af::Output& uninitialized, af::Saver* saver, const Flags& f,
                           const std::string& self, const std::function<af::Status()>& also = {}) {
  return wait_for("the cluster to recover", Clock::now() + std::chrono::milliseconds(f.startup_timeout_ms), [&] {
    af::Status s = all_initialized(sess, uninitialized);
    if (saver && s.code() == af::Code::failed_precondition) {
      auto latest = af::latest_checkpoint(f.checkpoint_path);
      af::Status fixed = latest.ok() ? saver->restore_file(sess, *latest) : sess.run_init();
      if (!fixed.ok()) return fixed;
      std::cerr << af::log_time() << " " << self << ": variables lost with a ps task; "
                << (latest.ok() ? "restored " + *latest : std::string("initialized them afresh (no checkpoint yet)"))
                << std::endl;
    }
    if (!s.ok()) return s;
    return also ? also() : af::Status::OK();
  });
}

// The chief's last words: test evaluation, the final checkpoint and summary, and the
// Shutdown that lets every serving task (ps, and the workers of in-graph replication) exit 0.
// How long training runs: --epoch_number epochs of the whole data (or --max_steps), when
// one global step consumes `examples_per_step` examples.
struct Schedule {
  int64_t steps_per_epoch = 1;
  int64_t target = 0;  // the global step that ends training
};
Schedule schedule(const Flags& f, int64_t n_train, int64_t examples_per_step) {
  Schedule s;
  s.steps_per_epoch = std::max<int64_t>(1, (n_train + examples_per_step - 1) / examples_per_step);
  s.target = int64_t{f.epoch_number} * s.steps_per_epoch;
  if (f.max_steps > 0) s.target = std::min(s.target, f.max_steps);
  return s;
}

// What the edges and the sockets of this process had moved at one moment.
struct TrafficMark {
  afn::EdgeTraffic edges = afn::edge_traffic();
  std::map<uint64_t, afn::TcpSocketBytes> sockets = afn::tcp_socket_bytes();
};

void note_traffic(TrainResult& r, const TrafficMark& before, int64_t steps, const af::Graph& g) {
  afn::EdgeTraffic now = afn::edge_traffic();
  r.model_bytes = model_bytes(g);
  if (steps > 0) {
    r.wire_bytes_per_step = static_cast<double>((now.sent - before.edges.sent) + (now.received - before.edges.received)) /
                            static_cast<double>(steps);
    const afn::TcpBytes tcp = afn::tcp_bytes_between(before.sockets, afn::tcp_socket_bytes());
    r.socket_bytes_per_step = static_cast<double>(tcp.acked + tcp.received) / static_cast<double>(steps);
  }
}

af::Status chief_finish(af::Session& sess, Model& m, const Split& data, const Flags& f, const ClusterTask& task,
                        af::Saver& saver, std::optional<af::SummaryWriter>& writer, int64_t gstep, TrainResult& r) {
  AF_RETURN_IF_ERROR(evaluate(sess, m, data.x_test, data.y_test, &r.test_loss, &r.test_accuracy));
  AF_RETURN_IF_ERROR(saver.save(sess, f.checkpoint_path, gstep));
  if (writer) {
    (void)writer->add_scalar("test/accuracy", static_cast<float>(r.test_accuracy), gstep);
    (void)writer->close();
  }
  for (auto& [name, hp] : task.servers) {
    af::Status s = afn::request_shutdown(hp.host, hp.port, "training is over (" + task.self + ")");
    if (!s.ok()) std::cerr << name << " did not confirm its shutdown: " << s.to_string() << std::endl;
  }
  return af::Status::OK();
}

}  // namespace

af::Result<TrainResult> train_distributed(af::Graph& g, Model& m, const Split& data, const Flags& f, ClusterTask& task,
                                          af::optim::Optimizer* optimizer) {
  const bool sync = f.sync_mode == "sync", ssp = f.sync_mode == "ssp";
  const int replicas = sync ? (f.replicas_to_aggregate > 0 ? f.replicas_to_aggregate : task.num_workers - f.backup_workers) : 1;
  const int64_t examples_per_step = int64_t{f.batch_size} * replicas;
  const auto [steps_per_epoch, target] = schedule(f, data.x_train.dim(0), examples_per_step);

  // The graph: the same on every task, but for this worker's index in the sync and clock ops.
  af::Output step = af::train::global_step(g);
  std::unique_ptr<af::optim::Optimizer> owned;
  if (!optimizer && m.optimizers.empty()) {
    owned = make_optimizer(f, g, step, steps_per_epoch);
    optimizer = owned.get();
  }
  const std::vector<af::train::OptimizerVars> parts = optimizers_of(m, optimizer);
  af::Output new_step;  // the global step after this task's step
  af::Operation train_op;
  af::train::SyncReplicasOps sync_ops;
  if (sync) {
    af::train::SyncReplicasOptions so;
    so.replicas_to_aggregate = replicas;
    so.timeout_ms = f.sync_timeout_ms;
    sync_ops = af::train::sync_replicas_minimize(parts, m.loss, step, task.worker, so);
  } else {
    train_op = af::train::minimize(parts, m.loss, step);
    af::ControlDependencies after(g, {train_op});
    new_step = af::read_variable(step, "step_after_update");
  }
  af::train::WorkerTable table;
  table.device = "/job:ps/task:0/cpu:0";
  table.num_workers = task.num_workers;
  af::Output clock = af::placeholder(g, af::i64, af::Shape{}, "worker_clock_value");
  af::Output clock_out;
  if (ssp) {
    af::ControlDependencies after(g, {train_op});
    clock_out = af::train::worker_clock(g, table, task.worker, clock, f.staleness, f.sync_timeout_ms);
  }
  af::Operation done_op = af::train::worker_done(g, table, task.worker);
  // Polled by the chief at the end (a second at a time), so that it can restore a ps lost
  // meanwhile: the workers still training wait for that, and the chief for them.
  af::Output all_done = af::train::wait_workers_done(g, table, std::min<int64_t>(1000, f.startup_timeout_ms));
  af::Output clock_log = af::train::worker_clock_log(g, table);
  // Asked on each ps, answered here: polling it moves a bool per variable, not the model.
  af::Output uninitialized = af::report_uninitialized_variables(g);
  std::optional<af::Saver> saver;
  if (task.is_chief) saver.emplace(g);

  af::SessionOptions opts;
  opts.intra_op_threads = f.threads;
  opts.target = task.target;
  opts.shared_container = "between_graph_replication";
  opts.step_timeout_ms = f.step_timeout_ms;
  AF_ASSIGN_OR_RETURN(af::Session sess, af::Session::create(g, opts));
  const auto deadline = Clock::now() + std::chrono::milliseconds(f.startup_timeout_ms);

  std::string resumed_from;
  if (task.is_chief) {
    if (f.mode == "train")
      if (auto latest = af::latest_checkpoint(f.checkpoint_path); latest.ok()) resumed_from = *latest;
    AF_RETURN_IF_ERROR(wait_for("the ps tasks", deadline, [&] {
      return resumed_from.empty() ? sess.run_init() : saver->restore_file(sess, resumed_from);
    }));
  } else {
    AF_RETURN_IF_ERROR(wait_for("the chief " + task.chief + " to initialize the variables", deadline,
                                [&] { return all_initialized(sess, uninitialized); }));
  }
  auto read_step = [&] { return read_global_step(sess, step, f); };
  AF_ASSIGN_OR_RETURN(int64_t gstep, read_step());
  const int64_t start_step = gstep;
  auto recover = [&] { return recover_cluster(sess, uninitialized, task.is_chief ? &*saver : nullptr, f, task.self); };
  auto last_save = Clock::now();
  if (!resumed_from.empty()) std::cout << "resuming from " << resumed_from << " at step " << gstep << std::endl;
  std::cout << task.describe() << ": training to global step " << target << " (" << f.sync_mode << ", "
            << steps_per_epoch << " steps per epoch)" << std::endl;

  std::optional<af::SummaryWriter> writer;
  if (task.is_chief) {
    if (auto w = af::SummaryWriter::create(f.output_path); w.ok()) {
      writer = std::move(*w);
      (void)writer->add_graph(g);
    } else {
      std::cerr << "summaries disabled: " << w.status().to_string() << "\n";
    }
  }

  // This worker's shard: every num_workers-th record.
  std::vector<int64_t> mine;
  for (int64_t r = task.worker; r < data.x_train.dim(0); r += task.num_workers) mine.push_back(r);
  af::Tensor xs = gather_rows(data.x_train, mine, 0, mine.size());
  af::Tensor ys = gather_rows(data.y_train, mine, 0, mine.size());
  const int64_t shard = xs.dim(0);
  if (shard == 0) return af::invalid_argument(task.describe() + " has no training records in its shard");
  std::vector<int64_t> order(static_cast<size_t>(shard));
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 rng(static_cast<uint64_t>(f.seed) * 1000003u + static_cast<uint64_t>(task.worker));

  TrainResult r;
  af::Tensor val_x = data.x_test.slice_rows(0, std::min<int64_t>(1000, data.x_test.dim(0)));
  af::Tensor val_y = data.y_test.slice_rows(0, val_x.dim(0));
  auto started = Clock::now();
  const TrafficMark traffic0;
  int64_t local_steps = 0, examples = 0, first_count = 0;
  // This worker's share of an epoch's steps (in sync mode each step is all of theirs).
  RecentLoss recent(sync ? steps_per_epoch : steps_per_epoch / std::max(1, task.num_workers));
  const int64_t save_every = f.save_checkpoint_steps > 0 ? f.save_checkpoint_steps : steps_per_epoch;
  int64_t next_save = (gstep / save_every + 1) * save_every;
  int64_t next_report = gstep + std::max<int64_t>(1, target / 10);
  // The cluster's warm-up in global steps: each worker's first steps (a sync step takes
  // `replicas` of them).
  SteadyRate steady(kWarmupStepsPerWorker * task.num_workers / replicas);
  while (gstep < target) {
    if (f.shuffle) std::shuffle(order.begin(), order.end(), rng);
    for (size_t b = 0; b < order.size() && gstep < target; b += static_cast<size_t>(f.batch_size)) {
      size_t e = std::min(order.size(), b + static_cast<size_t>(f.batch_size));
      af::FeedDict feeds{{m.x, features(gather_rows(xs, order, b, e))}, {m.y, gather_rows(ys, order, b, e)}};
      if (m.training.valid()) feeds.push_back({m.training, af::Tensor::scalar(true)});
      if (f.slow_step_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(f.slow_step_ms));
      std::vector<af::Fetch> fetches{m.loss};
      std::vector<af::Operation> targets;
      if (sync) {
        feeds.push_back({sync_ops.local_step, af::Tensor::scalar<int64_t>(gstep)});
        fetches.push_back(task.is_chief ? sync_ops.chief_step : sync_ops.worker_step);
      } else {
        fetches.push_back(new_step);
        if (ssp) {
          feeds.push_back({clock, af::Tensor::scalar<int64_t>(local_steps + 1)});
          fetches.push_back(clock_out);
        }
      }
      auto out = sess.run(fetches, feeds, targets);
      if (!out.ok() && retryable(out.status())) {
        // A task was lost. Wait until the cluster answers again; if a ps came back
        // without its variables, the chief restores the last checkpoint.
        std::cerr << af::log_time() << " " << task.self << ": the step at global step " << gstep << " failed (" << out.status().to_string()
                  << "); waiting for the cluster to recover" << std::endl;
        AF_RETURN_IF_ERROR(recover());
        AF_ASSIGN_OR_RETURN(gstep, read_step());
        std::cerr << af::log_time() << " " << task.self << ": the cluster is back at global step " << gstep << std::endl;
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
      if (!task.is_chief) continue;
      steady.update(gstep - start_step, (gstep - start_step) * examples_per_step);
      if (writer && local_steps % 10 == 0) (void)writer->add_scalar("loss", static_cast<float>(loss), gstep);
      if (f.steps_to_validate > 0 && local_steps % f.steps_to_validate == 0) {
        double vl, va;
        af::Status validated = evaluate(sess, m, val_x, val_y, &vl, &va);
        if (!validated.ok() && retryable(validated)) continue;  // the next step finds out and recovers
        AF_RETURN_IF_ERROR(validated);
        if (writer) {
          (void)writer->add_scalar("validation/loss", static_cast<float>(vl), gstep);
          (void)writer->add_scalar("validation/accuracy", static_cast<float>(va), gstep);
        }
      }
      if (gstep >= next_report) {
        char at[32];
        std::snprintf(at, sizeof at, "%.2f", std::chrono::duration<double>(Clock::now() - started).count());
        std::cout << "global step " << gstep << "/" << target << "  loss " << recent.mean()
                  << "  (" << at << " s)" << std::endl;
        next_report = gstep + std::max<int64_t>(1, target / 10);
      }
      bool periodic = Clock::now() - last_save >= std::chrono::milliseconds(static_cast<int64_t>(f.save_checkpoint_secs * 1000));
      if ((gstep >= next_save || periodic) && gstep < target) {
        af::Status saved = saver->save(sess, f.checkpoint_path, gstep);
        if (!saved.ok() && retryable(saved)) continue;  // the next step finds out and recovers
        AF_RETURN_IF_ERROR(saved);
        next_save = (gstep / save_every + 1) * save_every;
        last_save = Clock::now();
      }
    }
  }
  r.seconds = std::chrono::duration<double>(Clock::now() - started).count();
  r.steady_examples_per_second = steady.per_second(gstep - start_step, (gstep - start_step) * examples_per_step);
  note_traffic(r, traffic0, local_steps, g);
  AF_RETURN_IF_ERROR(wait_for("the ps tasks to take this worker's end of training",
                              Clock::now() + std::chrono::milliseconds(f.startup_timeout_ms),
                              [&] { return sess.run({}, {}, {done_op}).status(); }));
  r.steps = gstep;
  r.epochs = static_cast<int>(gstep / steps_per_epoch);
  r.first_loss = first_count ? r.first_loss / static_cast<double>(first_count) : 0;
  r.last_loss = recent.mean();
  r.examples_per_second = r.seconds > 0 ? static_cast<double>(examples) / r.seconds : 0;
  if (!task.is_chief) return r;

  // The cluster's throughput: every worker's examples while the chief trained.
  r.examples_per_second = r.seconds > 0 ? static_cast<double>((gstep - start_step) * examples_per_step) / r.seconds : 0;
  const auto done_by = Clock::now() + std::chrono::milliseconds(f.startup_timeout_ms);
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
    std::cerr << "only " << n_done << " of " << task.num_workers << " workers reported the end of training within "
              << f.startup_timeout_ms << " ms" << std::endl;
  if (!f.clock_log.empty()) {
    auto records = sess.run({clock_log});
    if (!records.ok()) return records.status();
    std::ofstream out(f.clock_log);
    const af::Tensor& t = (*records)[0];
    for (int64_t i = 0; i < t.dim(0); ++i)
      out << t.data<int64_t>()[3 * i] << " " << t.data<int64_t>()[3 * i + 1] << " " << t.data<int64_t>()[3 * i + 2] << "\n";
    if (!out) return af::Status(af::Code::internal, "cannot write --clock_log " + f.clock_log);
  }
  if (sync) {
    auto stale = sess.run({sync_ops.num_stale});
    if (stale.ok()) std::cout << "sync: " << (*stale)[0].item<int64_t>() << " stale gradients dropped" << std::endl;
  }
  AF_RETURN_IF_ERROR(chief_finish(sess, m, data, f, task, *saver, writer, gstep, r));
  return r;
}

af::Result<TrainResult> train_in_graph(af::Graph& g, Model& m, const std::function<Model(af::Graph&)>& build,
                                       const Split& data, const Flags& f, ClusterTask& task) {
  if (!build) return af::invalid_argument("--replication in_graph: this sample cannot build its model once per tower");
  if (!m.optimizers.empty())
    return af::invalid_argument("--replication in_graph needs the loop's optimizer; this model trains its parts with optimizers of its own");
  const int towers_n = static_cast<int>(task.tower_devices.size());
  const int64_t n_train = data.x_train.dim(0);
  const int64_t global_batch = int64_t{f.batch_size} * towers_n;
  const auto [steps_per_epoch, target] = schedule(f, n_train, global_batch);

  af::Output step = af::train::global_step(g);
  auto optimizer = make_optimizer(f, g, step, steps_per_epoch);
  std::vector<Model> towers{m};
  std::vector<af::optim::GradsAndVars> tower_grads;
  tower_grads.push_back(optimizer->compute_gradients(m.loss));
  for (int i = 1; i < towers_n; ++i) {
    // The tower's ops on its task, whatever the scopes outside say; the variables exist
    // already (on the ps) and are shared, and ops that name one run where it lives.
    af::DeviceScope on(g, [&g, dev = task.tower_devices[i]](const af::Node& n) -> std::string {
      for (auto& [key, value] : n.attrs)
        if (value.is<std::string>())
          if (const af::Node* v = g.find_node(value.get<std::string>()); v && v->op == "VariableV2") return "";
      return dev;
    });
    af::NameScope names(g, "tower_" + std::to_string(i));
    af::VariableScope reuse(g, "", true);
    towers.push_back(build(g));
    tower_grads.push_back(optimizer->compute_gradients(towers.back().loss));
  }
  af::optim::GradsAndVars averaged;
  for (size_t k = 0; k < tower_grads[0].size(); ++k) {
    const af::Output& v = tower_grads[0][k].second;
    std::vector<af::Output> parts;
    for (auto& tg : tower_grads) {
      const af::Gradient& gr = tg[k].first;
      if (gr.valid()) parts.push_back(gr.sparse() ? af::densify(gr, v) : gr.dense);
    }
    if (parts.empty()) continue;
    // Averaged where the variable lives: each tower's gradient crosses once.
    af::DeviceScope on_var(g, v.node().device);
    af::Gradient mean;
    mean.dense = af::add_n(parts, "tower_sum") * (1.0 / static_cast<double>(parts.size()));
    averaged.emplace_back(mean, v);
  }
  af::Operation train_op = optimizer->apply_gradients(averaged, step);
  af::Output new_step;
  {
    af::ControlDependencies after(g, {train_op});
    new_step = af::read_variable(step, "step_after_update");
  }
  af::Saver saver(g);
  af::Output uninitialized = af::report_uninitialized_variables(g);
  // One scalar on every tower's task: initializing touches the ps tasks only, and the
  // first step would otherwise find a worker that is still starting (its daemon not yet
  // listening) and fail rather than wait.
  std::vector<af::Fetch> towers_up;
  for (int i = 1; i < towers_n; ++i) {
    af::DeviceScope on(g, task.tower_devices[static_cast<size_t>(i)]);
    towers_up.emplace_back(af::identity(af::constant(g, 0.0f), "tower_" + std::to_string(i) + "_up"));
  }

  af::SessionOptions opts;
  opts.intra_op_threads = f.threads;
  opts.target = task.target;
  opts.step_timeout_ms = f.step_timeout_ms;
  AF_ASSIGN_OR_RETURN(af::Session sess, af::Session::create(g, opts));
  const auto deadline = Clock::now() + std::chrono::milliseconds(f.startup_timeout_ms);
  std::string resumed_from;
  if (f.mode == "train")
    if (auto latest = af::latest_checkpoint(f.checkpoint_path); latest.ok()) resumed_from = *latest;
  auto towers_answer = [&] { return towers_up.empty() ? af::Status::OK() : sess.run(towers_up).status(); };
  AF_RETURN_IF_ERROR(wait_for("the ps and worker tasks", deadline, [&] {
    AF_RETURN_IF_ERROR(resumed_from.empty() ? sess.run_init() : saver.restore_file(sess, resumed_from));
    return towers_answer();
  }));
  auto read_step = [&] { return read_global_step(sess, step, f); };
  AF_ASSIGN_OR_RETURN(int64_t gstep, read_step());
  const int64_t start_step = gstep;
  // A lost tower task is waited for (every step spans it); a lost ps is restored.
  auto recover = [&] { return recover_cluster(sess, uninitialized, &saver, f, task.self, towers_answer); };
  std::cout << task.self << ": in-graph replication over " << towers_n << " towers, training to global step " << target
            << " (" << steps_per_epoch << " steps per epoch)" << std::endl;
  std::optional<af::SummaryWriter> writer;
  if (auto w = af::SummaryWriter::create(f.output_path); w.ok()) {
    writer = std::move(*w);
    (void)writer->add_graph(g);
  }

  std::vector<int64_t> order(static_cast<size_t>(n_train));
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 rng(static_cast<uint64_t>(f.seed) * 1000003u);
  TrainResult r;
  auto started = Clock::now();
  const TrafficMark traffic0;
  int64_t first_count = 0, examples = 0;
  RecentLoss recent(steps_per_epoch);
  SteadyRate steady(kWarmupStepsPerWorker);  // every step runs every tower
  auto last_save = Clock::now();
  while (gstep < target) {
    if (f.shuffle) std::shuffle(order.begin(), order.end(), rng);
    for (size_t b = 0; b + static_cast<size_t>(towers_n) <= order.size() && gstep < target; b += static_cast<size_t>(global_batch)) {
      size_t e = std::min(order.size(), b + static_cast<size_t>(global_batch));
      af::FeedDict feeds;
      size_t per = (e - b) / static_cast<size_t>(towers_n);
      for (int i = 0; i < towers_n; ++i) {
        size_t tb = b + per * static_cast<size_t>(i), te = i + 1 == towers_n ? e : tb + per;
        feeds.push_back({towers[i].x, features(gather_rows(data.x_train, order, tb, te))});
        feeds.push_back({towers[i].y, gather_rows(data.y_train, order, tb, te)});
        if (towers[i].training.valid()) feeds.push_back({towers[i].training, af::Tensor::scalar(true)});
      }
      auto out = sess.run({m.loss, new_step}, feeds);
      if (!out.ok() && retryable(out.status())) {
        std::cerr << af::log_time() << " " << task.self << ": the step at global step " << gstep << " failed ("
                  << out.status().to_string() << "); waiting for the cluster to recover" << std::endl;
        AF_RETURN_IF_ERROR(recover());
        AF_ASSIGN_OR_RETURN(gstep, read_step());
        std::cerr << af::log_time() << " " << task.self << ": the cluster is back at global step " << gstep << std::endl;
        continue;
      }
      if (!out.ok()) return out.status().with_context(task.self + " at global step " + std::to_string(gstep));
      double loss = (*out)[0].element_as_double(0);
      gstep = (*out)[1].item<int64_t>();
      examples += static_cast<int64_t>(e - b);
      steady.update(gstep - start_step, examples);
      if (first_count < 20) {
        r.first_loss += loss;
        ++first_count;
      }
      recent.add(loss);
      if (writer && gstep % 10 == 0) (void)writer->add_scalar("loss", static_cast<float>(loss), gstep);
      bool periodic = Clock::now() - last_save >= std::chrono::milliseconds(static_cast<int64_t>(f.save_checkpoint_secs * 1000));
      const int64_t save_every = f.save_checkpoint_steps > 0 ? f.save_checkpoint_steps : steps_per_epoch;
      if ((gstep % save_every == 0 || periodic) && gstep < target) {
        af::Status saved = saver.save(sess, f.checkpoint_path, gstep);
        if (!saved.ok() && retryable(saved)) continue;  // the next step finds out and recovers
        AF_RETURN_IF_ERROR(saved);
        last_save = Clock::now();
      }
    }
  }
  r.seconds = std::chrono::duration<double>(Clock::now() - started).count();
  r.steady_examples_per_second = steady.per_second(gstep - start_step, examples);
  note_traffic(r, traffic0, gstep - start_step, g);
  r.steps = gstep;
  r.epochs = static_cast<int>(gstep / steps_per_epoch);
  r.first_loss = first_count ? r.first_loss / static_cast<double>(first_count) : 0;
  r.last_loss = recent.mean();
  r.examples_per_second = r.seconds > 0 ? static_cast<double>(examples) / r.seconds : 0;
  // The evaluation and the final checkpoint read every variable: restore a ps lost since.
  AF_RETURN_IF_ERROR(recover());
  AF_RETURN_IF_ERROR(chief_finish(sess, m, data, f, task, saver, writer, gstep, r));
  return r;
}

}  // namespace kit
