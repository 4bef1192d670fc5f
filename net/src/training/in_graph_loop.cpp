// In-graph replication: the chief alone is a client and runs a tower of the model on every
// training task, averaging the towers' gradients where each variable lives.
#include <numeric>
#include <random>

#include "actorflow/net/steady_rate.h"
#include "training/loop_support.h"

namespace actorflow::net {

using training::Clock;
using training::retryable;

Result<TrainResult> train_in_graph(Graph& g, TrainableModel& m, const std::function<TrainableModel(Graph&)>& build,
                                   const TrainingData& data, const TrainingLoopOptions& o, TrainingTask& task) {
  AF_RETURN_IF_ERROR(training::check_inputs(data, o));
  std::ostream& log = *o.log;
  if (!build) return invalid_argument("in-graph replication: this model cannot be built once per tower");
  if (!m.optimizers.empty())
    return invalid_argument("in-graph replication needs the loop's optimizer; this model trains its parts with optimizers of its own");
  const int towers_n = static_cast<int>(task.tower_devices.size());
  if (towers_n < 1) return invalid_argument(task.self + " has no towers: it is not the chief of an in-graph cluster");
  const int64_t n_train = data.x_train.dim(0);
  const int64_t global_batch = int64_t{o.batch_size} * towers_n;
  const auto [steps_per_epoch, target] = training::schedule(o, n_train, global_batch);

  Output step = train::global_step(g);
  std::unique_ptr<optim::Optimizer> owned;
  optim::Optimizer* optimizer = training::loop_optimizer(m, nullptr, o, g, step, steps_per_epoch, owned);
  std::vector<TrainableModel> towers{m};
  std::vector<optim::GradsAndVars> tower_grads;
  tower_grads.push_back(optimizer->compute_gradients(m.loss));
  for (int i = 1; i < towers_n; ++i) {
    // The tower's ops on its task, whatever the scopes outside say; the variables exist
    // already (on the ps) and are shared, and ops that name one run where it lives.
    DeviceScope on(g, [&g, dev = task.tower_devices[static_cast<size_t>(i)]](const Node& n) -> std::string {
      for (auto& [key, value] : n.attrs)
        if (value.is<std::string>())
          if (const Node* v = g.find_node(value.get<std::string>()); v && v->op == "VariableV2") return "";
      return dev;
    });
    NameScope names(g, "tower_" + std::to_string(i));
    VariableScope reuse(g, "", true);
    towers.push_back(build(g));
    tower_grads.push_back(optimizer->compute_gradients(towers.back().loss));
  }
  optim::GradsAndVars averaged;
  for (size_t k = 0; k < tower_grads[0].size(); ++k) {
    const Output& v = tower_grads[0][k].second;
    std::vector<Output> parts;
    for (auto& tg : tower_grads) {
      const Gradient& gr = tg[k].first;
      if (gr.valid()) parts.push_back(gr.sparse() ? densify(gr, v) : gr.dense);
    }
    if (parts.empty()) continue;
    // Averaged where the variable lives: each tower's gradient crosses once.
    DeviceScope on_var(g, v.node().device);
    Gradient mean;
    mean.dense = add_n(parts, "tower_sum") * (1.0 / static_cast<double>(parts.size()));
    averaged.emplace_back(mean, v);
  }
  Operation train_op = optimizer->apply_gradients(averaged, step);
  Output new_step;
  {
    ControlDependencies after(g, {train_op});
    new_step = read_variable(step, "step_after_update");
  }
  Saver saver(g);
  Output uninitialized = report_uninitialized_variables(g);
  // One scalar on every tower's task: initializing touches the ps tasks only, and the
  // first step would otherwise find a worker that is still starting (its daemon not yet
  // listening) and fail rather than wait.
  std::vector<Fetch> towers_up;
  for (int i = 1; i < towers_n; ++i) {
    DeviceScope on(g, task.tower_devices[static_cast<size_t>(i)]);
    towers_up.emplace_back(identity(constant(g, 0.0f), "tower_" + std::to_string(i) + "_up"));
  }

  SessionOptions opts;
  opts.intra_op_threads = o.threads;
  opts.target = task.target;
  opts.step_timeout_ms = o.step_timeout_ms;
  AF_ASSIGN_OR_RETURN(Session sess, Session::create(g, opts));
  const auto deadline = Clock::now() + std::chrono::milliseconds(o.startup_timeout_ms);
  std::string resumed_from;
  if (o.resume)
    if (auto latest = latest_checkpoint(o.checkpoint_dir); latest.ok()) resumed_from = *latest;
  auto towers_answer = [&] { return towers_up.empty() ? Status::OK() : sess.run(towers_up).status(); };
  AF_RETURN_IF_ERROR(training::wait_for(log, "the ps and worker tasks", deadline, [&] {
    AF_RETURN_IF_ERROR(resumed_from.empty() ? sess.run_init() : saver.restore_file(sess, resumed_from));
    return towers_answer();
  }));
  auto read_step = [&] { return training::read_global_step(sess, step, o); };
  AF_ASSIGN_OR_RETURN(int64_t gstep, read_step());
  const int64_t start_step = gstep;
  // A lost tower task is waited for (every step spans it); a lost ps is restored.
  auto recover = [&] { return training::recover_cluster(sess, uninitialized, &saver, o, task.self, towers_answer); };
  const training::StepRecovery recovery{.log = &log,
                                        .self = task.self,
                                        .context = task.self,
                                        .awaited = "the cluster to recover",
                                        .back = "the cluster",
                                        .rejoin = [&]() -> Result<int64_t> {
                                          AF_RETURN_IF_ERROR(recover());
                                          return read_step();
                                        }};
  *o.out << task.self << ": in-graph replication over " << towers_n << " towers, training to global step " << target
         << " (" << steps_per_epoch << " steps per epoch)" << std::endl;
  std::optional<SummaryWriter> writer = training::chief_summaries(g, o);

  std::vector<int64_t> order(static_cast<size_t>(n_train));
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 rng(static_cast<uint64_t>(o.seed) * 1000003u);
  TrainResult r;
  auto started = Clock::now();
  const training::TrafficMark traffic0;
  training::StepTally tally(steps_per_epoch);
  SteadyRate steady(kWarmupStepsPerWorker);  // every step runs every tower
  auto last_save = Clock::now();
  const int64_t save_every = o.save_checkpoint_steps > 0 ? o.save_checkpoint_steps : steps_per_epoch;
  while (gstep < target) {
    if (o.shuffle) std::shuffle(order.begin(), order.end(), rng);
    for (size_t b = 0; b + static_cast<size_t>(towers_n) <= order.size() && gstep < target;
         b += static_cast<size_t>(global_batch)) {
      size_t e = std::min(order.size(), b + static_cast<size_t>(global_batch));
      FeedDict feeds;
      size_t per = (e - b) / static_cast<size_t>(towers_n);
      for (int i = 0; i < towers_n; ++i) {
        size_t tb = b + per * static_cast<size_t>(i), te = i + 1 == towers_n ? e : tb + per;
        const TrainableModel& tower = towers[static_cast<size_t>(i)];
        feeds.push_back({tower.x, training::batch_features(data, training::gather_rows(data.x_train, order, tb, te))});
        feeds.push_back({tower.y, training::gather_rows(data.y_train, order, tb, te)});
        if (tower.training.valid()) feeds.push_back({tower.training, Tensor::scalar(true)});
      }
      auto out = sess.run({m.loss, new_step}, feeds);
      if (!out.ok()) {
        AF_RETURN_IF_ERROR(recovery.after(out.status(), gstep));
        continue;
      }
      const double loss = tally.add(*out, e - b, gstep);
      steady.update(gstep - start_step, tally.examples());
      if (writer && gstep % 10 == 0) (void)writer->add_scalar("loss", static_cast<float>(loss), gstep);
      if ((gstep % save_every == 0 || training::save_period_passed(o, last_save)) && gstep < target) {
        Status saved = saver.save(sess, o.checkpoint_dir, gstep);
        if (!saved.ok() && retryable(saved)) continue;  // the next step finds out and recovers
        AF_RETURN_IF_ERROR(saved);
        last_save = Clock::now();
      }
    }
  }
  r.seconds = std::chrono::duration<double>(Clock::now() - started).count();
  r.steady_examples_per_second = steady.per_second();
  training::note_traffic(r, traffic0, gstep - start_step, g);
  tally.finish(r, gstep, steps_per_epoch);
  // The evaluation and the final checkpoint read every variable: restore a ps lost since.
  AF_RETURN_IF_ERROR(recover());
  AF_RETURN_IF_ERROR(training::chief_finish(sess, m, data, o, task, saver, writer, gstep, r));
  return r;
}

}  // namespace actorflow::net
