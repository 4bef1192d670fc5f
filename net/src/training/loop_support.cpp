#include "training/loop_support.h"

#include "actorflow/device_name.h"

#include <cstdio>
#include <cstring>
#include <thread>

#include "actorflow/log_time.h"

namespace actorflow::net::training {

Status check_inputs(const TrainingData& data, const TrainingLoopOptions& o) {
  if (o.batch_size < 1) return invalid_argument("the batch size is " + std::to_string(o.batch_size) + "; it must be at least 1");
  if (o.save_checkpoint_steps < 0) return invalid_argument("save_checkpoint_steps must not be negative");
  if (!o.out || !o.log) return invalid_argument("the loop options need both streams, out and log");
  auto rows = [](const Tensor& t) { return t.valid() && t.rank() > 0 ? t.dim(0) : -1; };
  if (rows(data.x_train) < 0 || rows(data.x_train) != rows(data.y_train))
    return invalid_argument("the training split needs x and y with one row per example (x: " +
                            std::to_string(rows(data.x_train)) + " rows, y: " + std::to_string(rows(data.y_train)) + ")");
  if (rows(data.x_test) < 0 || rows(data.x_test) != rows(data.y_test))
    return invalid_argument("the test split needs x and y with one row per example (x: " +
                            std::to_string(rows(data.x_test)) + " rows, y: " + std::to_string(rows(data.y_test)) + ")");
  return Status::OK();
}

bool retryable(const Status& s) {
  return s.code() == Code::unavailable || s.code() == Code::failed_precondition ||
         s.code() == Code::deadline_exceeded || s.code() == Code::cancelled;
}

Status wait_for(std::ostream& log, const std::string& what, Clock::time_point deadline,
                const std::function<Status()>& attempt) {
  auto pause = std::chrono::milliseconds(100);
  const auto start = Clock::now();
  auto said = Clock::time_point();
  while (true) {
    Status s = attempt();
    if (s.ok() || !retryable(s)) return s;
    auto now = Clock::now();
    if (now + pause > deadline) return Status(Code::deadline_exceeded, "gave up waiting for " + what + ": " + s.message());
    // Once at first, then every 10 s, as TF's "CreateSession still waiting for response
    // from worker": a late task is waited for, never fatal before the deadline.
    if (said == Clock::time_point() || now - said >= std::chrono::seconds(10)) {
      auto waited = std::chrono::duration_cast<std::chrono::seconds>(now - start).count();
      log << log_time() << (said == Clock::time_point() ? " waiting for " : " still waiting for ") << what
          << (waited > 0 ? " after " + std::to_string(waited) + " s" : std::string()) << " (" << s.message() << ")"
          << std::endl;
      said = now;
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(2000));
  }
}

Result<int64_t> read_global_step(Session& sess, const Output& step, const TrainingLoopOptions& o) {
  int64_t value = 0;
  AF_RETURN_IF_ERROR(wait_for(*o.log, "the global step", Clock::now() + std::chrono::milliseconds(o.startup_timeout_ms), [&] {
    auto v = sess.run({step});
    if (v.ok()) value = (*v)[0].item<int64_t>();
    return v.status();
  }));
  return value;
}

Status all_initialized(Session& sess, const Output& report) {
  AF_ASSIGN_OR_RETURN(auto out, sess.run({report}));
  const Tensor& names = out[0];
  if (names.num_elements() == 0) return Status::OK();
  std::string listed;
  for (int64_t i = 0; i < std::min<int64_t>(3, names.num_elements()); ++i)
    listed += (i ? ", '" : "'") + names.data<std::string>()[i] + "'";
  return Status(Code::failed_precondition, std::to_string(names.num_elements()) + " variables are not initialized (" +
                                               listed + (names.num_elements() > 3 ? ", ..." : "") + ")");
}

Status recover_cluster(Session& sess, const Output& uninitialized, Saver* saver, const TrainingLoopOptions& o,
                       const std::string& self, const std::function<Status()>& also) {
  return wait_for(*o.log, "the cluster to recover", Clock::now() + std::chrono::milliseconds(o.startup_timeout_ms), [&] {
    Status s = all_initialized(sess, uninitialized);
    if (saver && s.code() == Code::failed_precondition) {
      auto latest = latest_checkpoint(o.checkpoint_dir);
      Status fixed = latest.ok() ? saver->restore_file(sess, *latest) : sess.run_init();
      if (!fixed.ok()) return fixed;
      *o.log << log_time() << " " << self << ": variables lost with a ps task; "
             << (latest.ok() ? "restored " + *latest : std::string("initialized them afresh (no checkpoint yet)"))
             << std::endl;
    }
    if (!s.ok()) return s;
    return also ? also() : Status::OK();
  });
}

Schedule schedule(const TrainingLoopOptions& o, int64_t n_train, int64_t examples_per_step) {
  Schedule s;
  s.steps_per_epoch = std::max<int64_t>(1, (n_train + examples_per_step - 1) / examples_per_step);
  s.target = int64_t{o.epochs} * s.steps_per_epoch;
  if (o.max_steps > 0) s.target = std::min(s.target, o.max_steps);
  return s;
}

optim::Optimizer* loop_optimizer(const TrainableModel& m, optim::Optimizer* given, const TrainingLoopOptions& o,
                                 Graph& g, const Output& step, int64_t steps_per_epoch,
                                 std::unique_ptr<optim::Optimizer>& owned) {
  if (given || !m.optimizers.empty()) return given;
  owned = o.make_optimizer ? o.make_optimizer(g, step, steps_per_epoch) : std::make_unique<optim::GradientDescent>(0.01);
  return owned.get();
}

Tensor gather_rows(const Tensor& t, const std::vector<int64_t>& order, size_t b, size_t e) {
  std::vector<int64_t> dims = t.shape().dims();
  dims[0] = static_cast<int64_t>(e - b);
  Tensor out(t.dtype(), Shape(dims));
  size_t row_bytes = static_cast<size_t>(t.dim(0) ? t.num_elements() / t.dim(0) : 0) * dtype_size(t.dtype());
  const char* src = static_cast<const char*>(t.raw_data());
  char* dst = static_cast<char*>(out.raw_data());
  for (size_t i = b; i < e; ++i)
    std::memcpy(dst + (i - b) * row_bytes, src + static_cast<size_t>(order[i]) * row_bytes, row_bytes);
  return out;
}

Tensor batch_features(const TrainingData& data, Tensor rows) {
  return data.features ? data.features(rows) : rows;
}

Shard shard_of(const TrainingData& data, int worker, int num_workers) {
  std::vector<int64_t> mine;
  for (int64_t r = worker; r < data.x_train.dim(0); r += num_workers) mine.push_back(r);
  return {gather_rows(data.x_train, mine, 0, mine.size()), gather_rows(data.y_train, mine, 0, mine.size())};
}

void RecentLoss::add(double loss) {
  window_.push_back(loss);
  sum_ += loss;
  if (window_.size() > cap_) {
    sum_ -= window_.front();
    window_.pop_front();
  }
}

double StepTally::add(const std::vector<Tensor>& fetched, size_t rows, int64_t& gstep) {
  double loss = fetched[0].element_as_double(0);
  gstep = fetched[1].item<int64_t>();
  ++local_steps_;
  examples_ += static_cast<int64_t>(rows);
  if (first_count_ < 20) {
    first_sum_ += loss;
    ++first_count_;
  }
  recent_.add(loss);
  return loss;
}

void StepTally::finish(TrainResult& r, int64_t gstep, int64_t steps_per_epoch) const {
  r.steps = gstep;
  r.epochs = static_cast<int>(gstep / steps_per_epoch);
  r.first_loss = first_count_ ? first_sum_ / static_cast<double>(first_count_) : 0;
  r.last_loss = recent_.mean();
  r.examples_per_second = r.seconds > 0 ? static_cast<double>(examples_) / r.seconds : 0;
}

Status StepRecovery::after(const Status& failed, int64_t& gstep) const {
  if (!retryable(failed)) return failed.with_context(context + " at global step " + std::to_string(gstep));
  *log << log_time() << " " << self << ": the step at global step " << gstep << " failed (" << failed.to_string()
       << "); waiting for " << awaited << std::endl;
  AF_ASSIGN_OR_RETURN(gstep, rejoin());
  *log << log_time() << " " << self << ": " << back << " is back at global step " << gstep << (note ? note() : std::string())
       << std::endl;
  return Status::OK();
}

int collective_gpu(const Graph& g) {
  for (int id = 0; id < g.num_nodes(); ++id) {
    const Node& n = g.node(id);
    if (n.op != "CollectiveAllReduce" && n.op != "CollectiveBroadcast") continue;
    auto d = parse_device_name(n.device);
    if (d.ok() && d->type == "gpu") return std::max(0, d->index);
  }
  return -1;
}

int64_t model_bytes(const Graph& g) {
  int64_t n = 0;
  for (int id : g.collection("trainable_variables")) {
    const Node& v = g.node(id);
    n += v.output_shapes[0].num_elements() * static_cast<int64_t>(dtype_size(v.output_dtypes[0]));
  }
  return n;
}

void note_traffic(TrainResult& r, const TrafficMark& before, int64_t steps, const Graph& g) {
  EdgeTraffic now = edge_traffic();
  r.model_bytes = model_bytes(g);
  if (steps > 0) {
    r.wire_bytes_per_step = static_cast<double>((now.sent - before.edges.sent) + (now.received - before.edges.received)) /
                            static_cast<double>(steps);
    const TcpBytes tcp = tcp_bytes_between(before.sockets, tcp_socket_bytes());
    r.socket_bytes_per_step = static_cast<double>(tcp.acked + tcp.received) / static_cast<double>(steps);
  }
}

std::optional<SummaryWriter> chief_summaries(const Graph& g, const TrainingLoopOptions& o) {
  std::optional<SummaryWriter> writer;
  if (auto w = SummaryWriter::create(o.summary_dir); w.ok()) {
    writer = std::move(*w);
    (void)writer->add_graph(g);
  } else {
    *o.log << "summaries disabled: " << w.status().to_string() << "\n";
  }
  return writer;
}

void report_progress(const TrainingLoopOptions& o, int64_t gstep, int64_t target, double loss, Clock::time_point started) {
  char at[32];
  std::snprintf(at, sizeof at, "%.2f", std::chrono::duration<double>(Clock::now() - started).count());
  *o.out << "global step " << gstep << "/" << target << "  loss " << loss << "  (" << at << " s)" << std::endl;
}

bool save_period_passed(const TrainingLoopOptions& o, Clock::time_point last_save) {
  return Clock::now() - last_save >= std::chrono::milliseconds(static_cast<int64_t>(o.save_checkpoint_secs * 1000));
}

Status chief_finish(Session& sess, const TrainableModel& m, const TrainingData& data, const TrainingLoopOptions& o,
                    const TrainingTask& task, Saver& saver, std::optional<SummaryWriter>& writer, int64_t gstep,
                    TrainResult& r) {
  AF_RETURN_IF_ERROR(evaluate(sess, m, data.x_test, data.y_test, &r.test_loss, &r.test_accuracy));
  AF_RETURN_IF_ERROR(saver.save(sess, o.checkpoint_dir, gstep));
  if (writer) {
    (void)writer->add_scalar("test/accuracy", static_cast<float>(r.test_accuracy), gstep);
    (void)writer->close();
  }
  for (auto& [name, hp] : task.servers) {
    Status s = request_shutdown(hp.host, hp.port, "training is over (" + task.self + ")");
    if (!s.ok()) *o.log << name << " did not confirm its shutdown: " << s.to_string() << std::endl;
  }
  return Status::OK();
}

}  // namespace actorflow::net::training
