// The cluster training API through its public headers, in one process: a ps task's
// daemon (start_task_daemon) and a chief (start_training_task) that trains a softmax
// regression with train_in_cluster: it reaches the schedule's global step, the loss falls,
// it checkpoints, and its Shutdown stops the ps. Also the errors the API returns instead of
// training a cluster it cannot, evaluate, and SteadyRate.
#include <doctest/doctest.h>

#include <actorflow/net/steady_rate.h>
#include <actorflow/net/training_loop.h>
#include <actorflow/net/training_task.h>

#include <actorflow/net/cluster_sources.h>
#include <actorflow/saver.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <sstream>
#include <thread>

namespace af = actorflow;
namespace afn = actorflow::net;
namespace fs = std::filesystem;

namespace {

constexpr int kFeatures = 4, kClasses = 3;

// A loopback port free a moment ago (the daemons bind the spec's fixed ports).
uint16_t free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  socklen_t len = sizeof a;
  REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0);
  ::close(fd);
  return ntohs(a.sin_port);
}

afn::ClusterSpec spec_for(const std::string& ps, const std::string& worker, const std::string& job) {
  afn::ClusterFlags f;
  f.ps_hosts = ps;
  f.worker_hosts = worker;
  f.job_name = job;
  auto spec = afn::parse_cluster_flags(f);
  REQUIRE_MESSAGE(spec.ok(), spec.status().to_string());
  return *spec;
}

// Rows whose class is the argmax of three fixed projections of the features: learnable.
af::Tensor features(int64_t first, int64_t rows, af::Tensor* labels) {
  af::Tensor x(af::f32, {rows, kFeatures});
  *labels = af::Tensor(af::i64, {rows});
  for (int64_t r = 0; r < rows; ++r) {
    float best = -1e9f;
    for (int j = 0; j < kFeatures; ++j)
      x.data<float>()[r * kFeatures + j] = std::sin(0.37f * static_cast<float>((first + r) * kFeatures + j) + 0.1f * j);
    for (int c = 0; c < kClasses; ++c) {
      float s = x.data<float>()[r * kFeatures + c] - 0.5f * x.data<float>()[r * kFeatures + (c + 1) % kFeatures];
      if (s > best) {
        best = s;
        labels->data<int64_t>()[r] = c;
      }
    }
  }
  return x;
}

afn::TrainableModel softmax_regression(af::Graph& g) {
  afn::TrainableModel m;
  m.x = af::placeholder(g, af::f32, {-1, kFeatures}, "x");
  m.y = af::placeholder(g, af::i64, {-1}, "y");
  auto w = af::variable(g, {kFeatures, kClasses}, af::glorot_uniform_initializer(3), "w");
  auto b = af::variable(g, {kClasses}, af::constant_initializer(0.0), "b");
  auto logits = af::matmul(m.x, w) + b;
  m.loss = af::mean(af::sparse_softmax_cross_entropy(logits, m.y));
  m.accuracy = af::accuracy(logits, m.y);
  m.prediction = af::argmax(logits, -1, "prediction");
  return m;
}

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("af_training_loop_" + std::to_string(::getpid()));
  TempDir() { fs::remove_all(path); }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

}  // namespace

TEST_CASE("a chief trains with a ps task through train_in_cluster, checkpoints, and stops the ps") {
  ::setenv("ACTORFLOW_TOKEN", "training-loop-test-token-0123456789", 1);
  TempDir dir;
  const std::string ps = "127.0.0.1:" + std::to_string(free_port());
  const std::string worker = "127.0.0.1:" + std::to_string(free_port());
  afn::TrainingTaskOptions how;
  afn::ClusterSpec ps_spec = spec_for(ps, worker, "ps");
  afn::ClusterSpec worker_spec = spec_for(ps, worker, "worker");
  CHECK(afn::task_serves(ps_spec, how));
  CHECK_FALSE(afn::task_serves(worker_spec, how));
  // A ps task does not train.
  CHECK(afn::start_training_task(ps_spec, how).status().code() == af::Code::invalid_argument);

  auto ps_daemon = afn::start_task_daemon(ps_spec, how);
  REQUIRE_MESSAGE(ps_daemon.ok(), ps_daemon.status().to_string());
  auto task = afn::start_training_task(worker_spec, how);
  REQUIRE_MESSAGE(task.ok(), task.status().to_string());
  afn::TrainingTask& t = **task;
  CHECK(t.is_chief);
  CHECK(t.num_workers == 1);
  CHECK(t.worker == 0);
  CHECK(t.self == "/job:worker/task:0");
  CHECK(t.ps.size() == 1);
  REQUIRE(t.servers.size() == 1);
  CHECK(t.servers[0].first == "/job:ps/task:0");
  CHECK(t.describe() == "/job:worker/task:0 (worker 0 of 1, the chief)");

  af::Graph g;
  g.set_seed(1);
  afn::TrainableModel m;
  {
    auto placement = t.place(g);  // the variables on the ps
    REQUIRE(placement);
    m = softmax_regression(g);
  }
  afn::TrainingData data;
  data.x_train = features(0, 512, &data.y_train);
  data.x_test = features(10000, 256, &data.y_test);
  afn::TrainingLoopOptions o;
  o.batch_size = 32;
  o.epochs = 3;
  o.checkpoint_dir = (dir.path / "checkpoint").string();
  o.summary_dir = (dir.path / "summaries").string();
  o.startup_timeout_ms = 30000;
  o.make_optimizer = [](af::Graph&, const af::Output&, int64_t) { return std::make_unique<af::optim::GradientDescent>(0.5); };
  std::ostringstream out, log;
  o.out = &out;
  o.log = &log;

  auto r = afn::train_in_cluster(g, m, data, o, t);
  REQUIRE_MESSAGE(r.ok(), r.status().to_string() << "\n" << log.str());
  CHECK(r->steps == 3 * (512 / 32));  // epochs of the whole data, counted in global steps
  CHECK(r->epochs == 3);
  CHECK(r->last_loss < r->first_loss);
  CHECK(r->test_accuracy > 0.5);
  CHECK(r->model_bytes == (kFeatures * kClasses + kClasses) * 4);
  CHECK(out.str().find("training to global step 48 (async, 16 steps per epoch)") != std::string::npos);
  CHECK(af::latest_checkpoint(o.checkpoint_dir).ok());
  // The chief's Shutdown stopped the ps task's daemon.
  auto joined = std::async(std::launch::async, [&] { (*ps_daemon)->join(); });
  const bool stopped = joined.wait_for(std::chrono::seconds(20)) == std::future_status::ready;
  CHECK(stopped);
  if (!stopped) (*ps_daemon)->stop();  // so that the join, and the future's destructor, end

  // The loops refuse what the task cannot train, and options or data they cannot use.
  afn::TrainableModel tower = m;
  afn::TrainingLoopOptions empty_batches = o;
  empty_batches.batch_size = 0;
  CHECK(afn::train_with_ps(g, tower, data, empty_batches, t).status().code() == af::Code::invalid_argument);
  afn::TrainingData unpaired = data;
  unpaired.y_train = data.y_train.slice_rows(0, 10);
  CHECK(afn::train_with_ps(g, tower, unpaired, o, t).status().code() == af::Code::invalid_argument);
  CHECK(afn::train_in_graph(g, tower, {}, data, o, t).status().code() == af::Code::invalid_argument);
  CHECK(afn::train_allreduce(g, tower, data, o, t).status().code() == af::Code::invalid_argument);
}

TEST_CASE("start_training_task refuses a spec that does not fit how the cluster trains") {
  afn::TrainingTaskOptions allreduce;
  allreduce.allreduce = true;
  afn::ClusterSpec with_ps = spec_for("127.0.0.1:1", "127.0.0.1:2", "worker");
  CHECK(afn::start_training_task(with_ps, allreduce).status().code() == af::Code::invalid_argument);
  afn::ClusterSpec no_ps = spec_for("", "127.0.0.1:2", "worker");
  CHECK(afn::start_training_task(no_ps, afn::TrainingTaskOptions{}).status().code() == af::Code::invalid_argument);
  afn::TrainingTaskOptions in_graph;
  in_graph.in_graph = true;
  afn::ClusterSpec second = spec_for("127.0.0.1:1", "127.0.0.1:2,127.0.0.1:3", "worker");
  afn::ClusterFlags f;
  f.ps_hosts = "127.0.0.1:1";
  f.worker_hosts = "127.0.0.1:2,127.0.0.1:3";
  f.job_name = "worker";
  f.task_index = "1";
  afn::ClusterSpec not_chief = afn::parse_cluster_flags(f).value();
  CHECK_FALSE(afn::task_serves(second, in_graph));  // worker 0 is the chief
  CHECK(afn::task_serves(not_chief, in_graph));     // the others serve its towers
}

TEST_CASE("evaluate averages loss and accuracy over batches; optimizers_or and sync_mode_name") {
  af::Graph g;
  afn::TrainableModel m = softmax_regression(g);
  auto sess = af::Session::create(g).value();
  REQUIRE(sess.run_init().ok());
  af::Tensor y;
  af::Tensor x = features(0, 2500, &y);  // three of evaluate's 1000-row batches
  double loss = -1, accuracy = -1;
  REQUIRE(afn::evaluate(sess, m, x, y, &loss, &accuracy).ok());
  auto whole = sess.run({m.loss, m.accuracy}, {{m.x, x}, {m.y, y}}).value();
  CHECK(loss == doctest::Approx(whole[0].element_as_double(0)).epsilon(1e-5));
  CHECK(accuracy == doctest::Approx(whole[1].element_as_double(0)).epsilon(1e-5));

  af::optim::GradientDescent sgd(0.1);
  auto parts = m.optimizers_or(&sgd);
  REQUIRE(parts.size() == 1);
  CHECK(parts[0].optimizer == &sgd);
  CHECK(parts[0].var_list.empty());
  CHECK(std::string(afn::sync_mode_name(afn::SyncMode::ssp)) == "ssp");
  CHECK(std::string(afn::sync_mode_name(afn::SyncMode::sync)) == "sync");
  CHECK(std::string(afn::sync_mode_name(afn::SyncMode::async)) == "async");
}

TEST_CASE("SteadyRate counts from the end of the warm-up to the last step") {
  afn::SteadyRate rate(10);
  rate.update(5, 500);
  CHECK(rate.per_second() == 0);  // still warming up
  rate.update(10, 1000);
  CHECK(rate.per_second() == 0);  // no step since the warm-up ended
  const auto t0 = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  rate.update(20, 2000);
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double r = rate.per_second();
  CHECK(r > 0);
  CHECK(r <= 1000 / 0.05);  // 1000 examples in at least the 50 ms slept
  CHECK(r >= 1000 / elapsed * 0.999);
  // Time after the last step (an evaluation, a checkpoint) does not lower the rate.
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  CHECK(rate.per_second() == r);
}
