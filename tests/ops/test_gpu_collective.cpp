// NCCL all-reduce on GPUs (actorflow/ops/nccl_group.h, ops/cuda/gpu_nccl.cpp and
// gpu_collective.cpp). Two ranks are two processes, each this binary started again to run
// the rank case below, both on GPU 0 (NCCL_MULTI_RANK_GPU_ENABLE=1, NCCL 2.30 and later;
// a machine with two GPUs would give each its own): a socket pair between them is the
// host group that carries NCCL's id, as the cluster's Gloo group does in training. In
// each rank: buckets started out of order are reduced in order; rank 0's GPU and host
// values reach rank 1; SGD on two halves of a batch reaches the weights of one process on
// the whole batch (max difference 1e-5); and once rank 1 is gone, rank 0's next
// all-reduce fails within the group's timeout and the group stays failed.
// Without a GPU the GPU cases skip (AF_REQUIRE_GPU=1 makes that a failure); the first
// case runs everywhere.
#include <doctest/doctest.h>

#include <actorflow/actorflow.h>
#include <actorflow/collective.h>
#include <actorflow/ops/cuda_info.h>
#include <actorflow/ops/gpu.h>
#include <actorflow/ops/nccl_group.h>

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>

#include "child_process.h"
#include "gpu_kernel_harness.h"

namespace af = actorflow;

namespace {

using Clock = std::chrono::steady_clock;

// Two processes joined by a socket: broadcast sends rank 0's host tensors to rank 1.
// The host half of a group, for the rendezvous; it sums nothing.
class SocketHostGroup final : public af::CollectiveGroup {
 public:
  SocketHostGroup(int rank, int size, int fd) : rank_(rank), size_(size), fd_(fd) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void all_reduce(std::vector<af::Tensor>, std::vector<af::Tensor>, int, int, bool, Done done) override {
    done(af::unimplemented("the test's host group sums nothing"));
  }
  void broadcast(std::vector<af::Tensor> in, std::vector<af::Tensor> out, Done done) override {
    for (size_t i = 0; i < in.size(); ++i) {
      const size_t n = in[i].bytes();
      if (rank_ == 0) {
        std::memcpy(out[i].raw_data(), in[i].raw_data(), n);
        if (size_ > 1 && !io(true, out[i].raw_data(), n)) return done(af::Status(af::Code::unavailable, "write to rank 1"));
      } else if (!io(false, out[i].raw_data(), n)) {
        return done(af::Status(af::Code::unavailable, "read from rank 0"));
      }
    }
    done(af::Status::OK());
  }

 private:
  bool io(bool write, void* p, size_t n) {
    auto* b = static_cast<char*>(p);
    const auto deadline = Clock::now() + std::chrono::seconds(30);
    while (n > 0) {
      pollfd pf{fd_, static_cast<short>(write ? POLLOUT : POLLIN), 0};
      if (Clock::now() > deadline || ::poll(&pf, 1, 1000) < 0) return false;
      if (!(pf.revents & (write ? POLLOUT : POLLIN))) continue;
      ssize_t k = write ? ::write(fd_, b, n) : ::read(fd_, b, n);
      if (k <= 0) return false;
      b += k;
      n -= static_cast<size_t>(k);
    }
    return true;
  }
  int rank_, size_, fd_;
};

af::Tensor filled(std::vector<float> v) {
  const int64_t n = static_cast<int64_t>(v.size());
  return af::Tensor::from_vector(v, {n});
}

std::vector<float> host_values(const af::Tensor& t) {
  auto h = t.device().type == af::DeviceType::GPU ? af::copy_to_host(t) : af::Result<af::Tensor>(t);
  REQUIRE_MESSAGE(h.ok(), h.status().to_string());
  const float* p = static_cast<const float*>(h->raw_data());
  return std::vector<float>(p, p + h->num_elements());
}

af::Tensor on_gpu(const af::Tensor& t) {
  auto d = af::copy_to_gpu(t, 0);
  REQUIRE_MESSAGE(d.ok(), d.status().to_string());
  return *d;
}

af::Tensor gpu_like(const af::Tensor& t) {
  auto ctx = af::gpu_device_context(0);
  REQUIRE_MESSAGE(ctx.ok(), ctx.status().to_string());
  return af::Tensor(t.dtype(), t.shape(), (*ctx)->allocator());
}

// Runs op(done) and waits for done, at most `limit`.
af::Status wait_done(const std::function<void(af::CollectiveGroup::Done)>& op,
                     std::chrono::seconds limit = std::chrono::seconds(60)) {
  struct W {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    af::Status s;
  };
  auto w = std::make_shared<W>();
  op([w](af::Status s) {
    std::lock_guard<std::mutex> lock(w->mu);
    w->done = true;
    w->s = s;
    w->cv.notify_all();
  });
  std::unique_lock<std::mutex> lock(w->mu);
  if (!w->cv.wait_for(lock, limit, [&] { return w->done; })) return af::deadline_exceeded("the op never called back");
  return w->s;
}

// y = x w: the loss of a linear model, on `device`.
struct Linear {
  af::Graph g;
  af::Output x, y, w, loss, step;
};

void build_linear(Linear& m, const std::string& device) {
  af::DeviceScope scope(m.g, device);
  m.x = af::placeholder(m.g, af::DType::f32, af::Shape{-1, 3}, "x");
  m.y = af::placeholder(m.g, af::DType::f32, af::Shape{-1, 2}, "y");
  m.w = af::variable(m.g, af::Tensor::from_vector(std::vector<float>{0.5f, -0.25f, 0.1f, 0.3f, -0.2f, 0.05f}, {3, 2}), "w");
  m.loss = af::reduce_mean(af::square(af::sub(af::matmul(m.x, m.w), m.y)));
  m.step = af::train::global_step(m.g);
}

// The batch of `rows` rows starting at `from` of a fixed data set of 8 rows.
std::pair<af::Tensor, af::Tensor> batch(int step, int from, int rows) {
  std::vector<float> x, y;
  for (int r = from; r < from + rows; ++r) {
    const float a = static_cast<float>((r * 7 + step * 3) % 11) / 11.f, b = static_cast<float>((r * 5 + step) % 13) / 13.f;
    x.insert(x.end(), {a, b, a * b});
    y.insert(y.end(), {a - b, 2 * a + b});
  }
  return {af::Tensor::from_vector(x, {rows, 3}), af::Tensor::from_vector(y, {rows, 2})};
}

constexpr int kSteps = 5;

// The weights after kSteps SGD steps on the whole batches, in one process on the GPU.
std::vector<float> one_process_weights() {
  Linear m;
  build_linear(m, "/gpu:0");
  af::optim::GradientDescent sgd(0.1);
  af::Operation train = sgd.minimize(m.loss, {}, m.step);
  auto sess = af::Session::create(m.g);
  REQUIRE_MESSAGE(sess.ok(), sess.status().to_string());
  REQUIRE(sess->run_init().ok());
  for (int s = 0; s < kSteps; ++s) {
    auto [x, y] = batch(s, 0, 8);
    auto out = sess->run({m.loss}, {{m.x, x}, {m.y, y}}, {train});
    REQUIRE_MESSAGE(out.ok(), out.status().to_string());
  }
  auto w = sess->run({m.w});
  REQUIRE_MESSAGE(w.ok(), w.status().to_string());
  return host_values((*w)[0]);
}

}  // namespace

TEST_CASE("nccl_group refuses a group without a host group, and says why where it cannot run") {
  auto none = af::nccl_group(nullptr);
  REQUIRE_FALSE(none.ok());
  if (!af::built_with_cuda() || af::cuda_device_count() == 0) {
    // No GPU: the reason, whatever the host group.
    auto host = std::make_shared<SocketHostGroup>(0, 1, -1);
    auto r = af::nccl_group(host);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == af::Code::unavailable);
    CHECK(r.status().message().find(af::built_with_cuda() ? "no GPU 0" : "without CUDA") != std::string::npos);
    return;
  }
  CHECK(none.status().code() == af::Code::invalid_argument);
  CHECK(none.status().message().find("no host group") != std::string::npos);
  auto bad = af::nccl_group(std::make_shared<SocketHostGroup>(0, 1, -1), {.gpu = 0, .timeout_ms = 0});
  CHECK(bad.status().code() == af::Code::invalid_argument);
}

TEST_CASE("needs a GPU: a one-rank NCCL group reduces and broadcasts on the GPU; a host group cannot run GPU collectives") {
  aft::require_gpu();
  auto host = std::make_shared<SocketHostGroup>(0, 1, -1);
  auto made = af::nccl_group(host, {.gpu = 0, .timeout_ms = 20000});
  REQUIRE_MESSAGE(made.ok(), made.status().to_string());
  auto nccl = *made;
  af::Status formed = nccl->form(Clock::now() + std::chrono::seconds(60));
  REQUIRE_MESSAGE(formed.ok(), formed.to_string());
  MESSAGE("NCCL " << nccl->nccl_version());
  af::Tensor a = on_gpu(filled({1, 2, 3, 4})), out = gpu_like(a);
  af::Status s = wait_done([&](auto d) { nccl->all_reduce({a}, {out}, 0, 1, true, d); });
  REQUIRE_MESSAGE(s.ok(), s.to_string());
  CHECK(host_values(out) == std::vector<float>{1, 2, 3, 4});

  // In a session: the collective ops on /gpu:0 with the NCCL group, then with a Gloo-like
  // host group, which must be refused by name.
  for (bool use_nccl : {true, false}) {
    af::Graph g;
    af::Output x, fed;
    {
      af::DeviceScope scope(g, "/gpu:0");
      x = fed = af::placeholder(g, af::DType::f32, af::Shape{3}, "x");
      af::NodeSpec spec;
      spec.op = "CollectiveAllReduce";
      spec.name = "reduce";
      spec.inputs = {af::mul(x, af::constant(g, 2.f))};
      auto op = g.add_node(std::move(spec));
      REQUIRE(op.ok());
      x = op->output(0);
    }
    af::SessionOptions o;
    o.collective_group = use_nccl ? std::shared_ptr<af::CollectiveGroup>(nccl) : std::shared_ptr<af::CollectiveGroup>(host);
    auto sess = af::Session::create(g, o);
    REQUIRE_MESSAGE(sess.ok(), sess.status().to_string());
    auto r = sess->run({x}, {{fed, filled({1, 2, 3})}});
    if (use_nccl) {
      REQUIRE_MESSAGE(r.ok(), r.status().to_string());
      CHECK(host_values((*r)[0]) == std::vector<float>{2, 4, 6});
    } else {
      REQUIRE_FALSE(r.ok());
      CHECK(r.status().message().find("reduce") != std::string::npos);
      CHECK(r.status().message().find("NCCL group") != std::string::npos);
    }
  }
}

// Started by the case below, once per rank (AF_NCCL_TEST_RANK, AF_NCCL_TEST_FD); never
// on its own (doctest skips it unless --no-skip).
TEST_CASE("rank of the two-process NCCL case, started by it" * doctest::skip(true)) {
  const char* rank_env = std::getenv("AF_NCCL_TEST_RANK");
  const char* fd_env = std::getenv("AF_NCCL_TEST_FD");
  REQUIRE_MESSAGE(rank_env, "started without AF_NCCL_TEST_RANK: this case runs only as a child of the two-process case");
  REQUIRE(fd_env);
  const int rank = std::atoi(rank_env), fd = std::atoi(fd_env);
  auto host = std::make_shared<SocketHostGroup>(rank, 2, fd);
  const int64_t timeout_ms = 5000;
  auto made = af::nccl_group(host, {.gpu = 0, .timeout_ms = timeout_ms});
  REQUIRE_MESSAGE(made.ok(), made.status().to_string());
  auto nccl = *made;
  af::Status formed = nccl->form(Clock::now() + std::chrono::seconds(60));
  if (!formed.ok() && (formed.message().find("Duplicate GPU") != std::string::npos ||
                       formed.message().find("same GPU") != std::string::npos)) {
    std::printf("NCCL_REFUSES_SHARED_GPU %s\n", formed.to_string().c_str());
    std::fflush(stdout);
    std::_Exit(aft::kSkipExitCode);
  }
  REQUIRE_MESSAGE(formed.ok(), formed.to_string());
  MESSAGE("rank " << rank << ": NCCL " << nccl->nccl_version());

  // Buckets started out of order (1, then 0) are reduced in order 0, 1 on both ranks.
  const float k = static_cast<float>(rank + 1);
  af::Tensor b0 = on_gpu(filled({k, 2 * k})), b1 = on_gpu(filled({10 * k, 20 * k, 30 * k}));
  af::Tensor o0 = gpu_like(b0), o1 = gpu_like(b1);
  af::Status s1 = af::Status::OK(), s0 = af::Status::OK();
  std::thread later([&] { s1 = wait_done([&](auto d) { nccl->all_reduce({b1}, {o1}, 1, 2, false, d); }); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  s0 = wait_done([&](auto d) { nccl->all_reduce({b0}, {o0}, 0, 2, true, d); });
  later.join();
  REQUIRE_MESSAGE(s0.ok(), s0.to_string());
  REQUIRE_MESSAGE(s1.ok(), s1.to_string());
  CHECK(host_values(o0) == std::vector<float>{1.5f, 3.f});   // the mean of 1..2 and 2..4
  CHECK(host_values(o1) == std::vector<float>{30, 60, 90});  // the sum
  CHECK(nccl->bytes_sent() == (8 + 12));                     // 2 (n - 1) / n of each buffer

  // Broadcast: a GPU tensor and a host one (the host group carries it), rank 0's.
  af::Tensor g_in = on_gpu(filled({k, k, k})), g_out = gpu_like(g_in);
  af::Tensor h_in = af::Tensor::from_vector(std::vector<int64_t>{rank == 0 ? 42 : 7}, {1}), h_out(af::DType::i64, {1});
  af::Status sb = wait_done([&](auto d) { nccl->broadcast({g_in, h_in}, {g_out, h_out}, d); });
  REQUIRE_MESSAGE(sb.ok(), sb.to_string());
  CHECK(host_values(g_out) == std::vector<float>{1, 1, 1});
  CHECK(h_out.item<int64_t>() == 42);

  // Training: each rank half of every batch, gradients averaged; the replicas start from
  // rank 0's values and end at one process's weights on the whole batch.
  Linear m;
  build_linear(m, "/gpu:0");
  af::optim::GradientDescent sgd(0.1);
  af::Operation train, sync;
  {
    af::DeviceScope scope(m.g, "/gpu:0");
    train = af::train::allreduce_minimize(sgd, m.loss, m.step);
    sync = af::train::broadcast_variables(m.g);
  }
  af::SessionOptions o;
  o.collective_group = nccl;
  auto sess = af::Session::create(m.g, o);
  REQUIRE_MESSAGE(sess.ok(), sess.status().to_string());
  REQUIRE(sess->run_init().ok());
  if (rank == 1) {  // a different start, which the broadcast must overwrite
    af::Status moved = sess->run({}, {}, {af::assign(m.w, af::constant(m.g, af::Tensor::from_vector(
                                                                             std::vector<float>(6, 9.f), {3, 2})))})
                           .status();
    REQUIRE_MESSAGE(moved.ok(), moved.to_string());
  }
  af::Status synced = sess->run({}, {}, {sync}).status();
  REQUIRE_MESSAGE(synced.ok(), synced.to_string());
  for (int s = 0; s < kSteps; ++s) {
    auto [x, y] = batch(s, rank * 4, 4);
    auto out = sess->run({m.loss}, {{m.x, x}, {m.y, y}}, {train});
    REQUIRE_MESSAGE(out.ok(), out.status().to_string());
  }
  auto w = sess->run({m.w, m.step});
  REQUIRE_MESSAGE(w.ok(), w.status().to_string());
  CHECK((*w)[1].item<int64_t>() == kSteps);
  const std::vector<float> got = host_values((*w)[0]), want = one_process_weights();
  REQUIRE(got.size() == want.size());
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::fabs(static_cast<double>(got[i]) - want[i]));
  MESSAGE("rank " << rank << ": max |w - one process's w| = " << worst);
  CHECK(worst <= 1e-5);

  // Rank 1 leaves; rank 0's next all-reduce has no partner: it fails within the timeout,
  // and the group stays failed until formed again.
  if (rank == 1) {
    std::printf("RANK_DONE 1\n");
    std::fflush(stdout);
    return;
  }
  char gone = 0;
  (void)!::read(fd, &gone, 1);  // EOF once rank 1 has exited
  const auto t0 = Clock::now();
  af::Tensor c = on_gpu(filled({1})), co = gpu_like(c);
  af::Status lost = wait_done([&](auto d) { nccl->all_reduce({c}, {co}, 0, 1, true, d); });
  const double took = std::chrono::duration<double>(Clock::now() - t0).count();
  MESSAGE("after rank 1 left: " << lost.to_string() << " in " << took << " s");
  CHECK_FALSE(lost.ok());
  CHECK(took < timeout_ms / 1000.0 + 10);
  af::Status after = wait_done([&](auto d) { nccl->all_reduce({c}, {co}, 0, 1, true, d); }, std::chrono::seconds(5));
  CHECK_FALSE(after.ok());
  CHECK(after.message().find("NCCL group failed") != std::string::npos);
  std::printf("RANK_DONE 0\n");
  std::fflush(stdout);
}

TEST_CASE("needs a GPU: two processes on one GPU reduce in bucket order, broadcast rank 0's values, train as one, and fail once one is gone") {
  aft::require_gpu();
  int sv[2];
  REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
  char self[4096];
  const ssize_t len = ::readlink("/proc/self/exe", self, sizeof self - 1);
  REQUIRE(len > 0);
  self[len] = 0;
  // Each rank holds its own end of the pair only (the other is closed at exec), so that
  // rank 0 reads EOF once rank 1 has exited.
  std::unique_ptr<aft::ChildProcess> ranks[2];
  for (int r = 0; r < 2; ++r) {
    REQUIRE(::fcntl(sv[r], F_SETFD, 0) == 0);
    REQUIRE(::fcntl(sv[1 - r], F_SETFD, FD_CLOEXEC) == 0);
    std::vector<std::string> env = aft::environment_without({"AF_NCCL_TEST_"});
    env.push_back("AF_NCCL_TEST_RANK=" + std::to_string(r));
    env.push_back("AF_NCCL_TEST_FD=" + std::to_string(sv[r]));
    if (!std::getenv("NCCL_MULTI_RANK_GPU_ENABLE")) env.push_back("NCCL_MULTI_RANK_GPU_ENABLE=1");
    // (ChildProcess adds a --port_file, which doctest ignores; no port is waited for.)
    ranks[r] = std::make_unique<aft::ChildProcess>(
        "af_nccl_rank" + std::to_string(r),
        std::vector<std::string>{self, "--source-file=*/test_gpu_collective.cpp", "--test-case=rank of the two-process*",
                                 "--no-skip=true"},
        std::move(env), true, std::chrono::seconds(0));
    REQUIRE(ranks[r]->pid() > 0);
  }
  ::close(sv[0]);
  ::close(sv[1]);
  // Bounded: both ranks end within 3 minutes or are killed.
  const auto deadline = Clock::now() + std::chrono::minutes(3);
  while (Clock::now() < deadline && (ranks[0]->running() || ranks[1]->running()))
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const std::string log0 = ranks[0]->log(), log1 = ranks[1]->log();
  int status[2];
  for (int r = 0; r < 2; ++r) {
    status[r] = ranks[r]->exit_code();  // -1: still running (killed now) or ended by a signal
    ranks[r]->kill9();
  }
  if (status[0] == aft::kSkipExitCode && log0.find("NCCL_REFUSES_SHARED_GPU") != std::string::npos)
    aft::skip("NCCL on this machine refuses two ranks on one GPU (NCCL 2.30 or later with "
              "NCCL_MULTI_RANK_GPU_ENABLE=1 allows it): " + log0.substr(0, 400),
              "AF_REQUIRE_GPU");
  INFO("rank 0 (exit " << status[0] << "):\n" << log0);
  INFO("rank 1 (exit " << status[1] << "):\n" << log1);
  CHECK(status[0] == 0);
  CHECK(status[1] == 0);
  // Each rank ran its case to the end (not skipped).
  CHECK(log0.find("RANK_DONE 0") != std::string::npos);
  CHECK(log1.find("RANK_DONE 1") != std::string::npos);
  MESSAGE("rank 0:\n" << log0);
}
