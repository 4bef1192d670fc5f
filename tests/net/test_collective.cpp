// All-reduce training's pieces in one process: ranks are threads, each with its own graph,
// session and Gloo group, meeting through the rendezvous store of a daemon of this process.
#include <doctest/doctest.h>

#include <actorflow/actorflow.h>
#include <actorflow/net/tcp_bytes.h>

#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <future>
#include <memory>
#include <thread>
#include <vector>

#include "../../net/src/connection_client.h"
#include "../../net/src/gloo_device.h"
#include "../../net/src/store_service.h"
#include "thread_policy.h"

namespace af = actorflow;
namespace afn = actorflow::net;
namespace an = actorflow::net;
using Clock = std::chrono::steady_clock;

namespace {

const char* kToken = "collective-test-token-0123456789";
constexpr int kFeatures = 4, kClasses = 3;

std::unique_ptr<afn::NodeDaemon> start_store_daemon() {
  afn::DaemonOptions o;
  o.task = "/job:worker/task:0";
  o.token = kToken;
  o.log = [](const std::string&) {};
  auto d = afn::NodeDaemon::start(o);
  REQUIRE(d.ok());
  return std::move(d).value();
}

// A port nothing listens on: a member whose daemon is gone.
uint16_t dead_port() {
  afn::DaemonOptions o;
  o.token = kToken;
  o.log = [](const std::string&) {};
  auto d = afn::NodeDaemon::start(o);
  REQUIRE(d.ok());
  uint16_t p = (*d)->port();
  (*d)->stop();
  return p;
}

// Examples k*rows .. (k+1)*rows-1 of a fixed data set.
void batch(int64_t first, int64_t rows, af::Tensor* x, af::Tensor* y) {
  *x = af::Tensor(af::DType::f32, af::Shape{rows, kFeatures});
  *y = af::Tensor(af::DType::i64, af::Shape{rows});
  for (int64_t r = 0; r < rows; ++r) {
    int64_t e = first + r;
    for (int j = 0; j < kFeatures; ++j) x->data<float>()[r * kFeatures + j] = std::sin(0.7f * static_cast<float>(e * kFeatures + j));
    y->data<int64_t>()[r] = (e * 7) % kClasses;
  }
}

struct Model {
  af::Graph g;
  af::Output x, y, loss, w, b, step;
  af::Operation train, sync;
  std::unique_ptr<af::optim::GradientDescent> opt;
};

// Softmax regression trained by SGD; with a group, through allreduce_minimize.
std::unique_ptr<Model> build(int64_t seed, bool allreduce, int64_t bucket_bytes = 1 << 20) {
  auto m = std::make_unique<Model>();
  m->g.set_seed(seed);
  m->x = af::placeholder(m->g, af::DType::f32, af::Shape{-1, kFeatures}, "x");
  m->y = af::placeholder(m->g, af::DType::i64, af::Shape{-1}, "y");
  m->w = af::variable(m->g, af::Shape{kFeatures, kClasses}, af::glorot_uniform(), "w");
  m->b = af::variable(m->g, af::Shape{kClasses}, af::random_uniform_initializer(-0.1, 0.1), "b");
  m->loss = af::mean(af::sparse_softmax_cross_entropy(af::matmul(m->x, m->w) + m->b, m->y));
  m->step = af::train::global_step(m->g);
  m->opt = std::make_unique<af::optim::GradientDescent>(0.5);
  if (allreduce) {
    af::train::AllReduceOptions o;
    o.bucket_bytes = bucket_bytes;
    m->train = af::train::allreduce_minimize(*m->opt, m->loss, m->step, o);
    m->sync = af::train::broadcast_variables(m->g);
  } else {
    m->train = m->opt->minimize(m->loss, {}, m->step);
  }
  return m;
}

std::vector<float> values(af::Session& s, const Model& m) {
  auto out = s.run({m.w, m.b});
  REQUIRE(out.ok());
  std::vector<float> v((*out)[0].data<float>(), (*out)[0].data<float>() + (*out)[0].num_elements());
  v.insert(v.end(), (*out)[1].data<float>(), (*out)[1].data<float>() + (*out)[1].num_elements());
  return v;
}

afn::GlooGroupOptions group_options(int rank, int n, const afn::NodeDaemon& d, int64_t timeout_ms = 20000,
                                    afn::AllReduceAlgorithm algorithm = afn::AllReduceAlgorithm::automatic) {
  afn::GlooGroupOptions o;
  o.algorithm = algorithm;
  o.rank = rank;
  o.size = n;
  o.store = {"127.0.0.1", d.port()};
  o.space = "test";
  o.token = kToken;
  o.timeout_ms = timeout_ms;
  for (int r = 0; r < n; ++r) {
    o.member_names.push_back("/job:worker/task:" + std::to_string(r));
    o.member_daemons.push_back({"127.0.0.1", d.port()});
  }
  return o;
}

// n groups of this process (one per rank), formed together.
std::vector<std::shared_ptr<afn::GlooGroup>> formed_groups(int n, const afn::NodeDaemon& d) {
  std::vector<std::shared_ptr<afn::GlooGroup>> groups;
  for (int r = 0; r < n; ++r) {
    auto g = afn::GlooGroup::create(group_options(r, n, d));
    REQUIRE(g.ok());
    groups.push_back(*g);
  }
  std::vector<std::future<af::Status>> formed;
  for (auto& g : groups) formed.push_back(std::async(std::launch::async, [g] { return g->form(Clock::now() + std::chrono::seconds(20)); }));
  for (auto& f : formed) REQUIRE(f.get().ok());
  return groups;
}

// Rank `rank` of n trains `steps` steps of `per_rank` examples (its slice of each global
// batch) and returns its final weights.
std::vector<float> train_rank(int rank, int n, const afn::NodeDaemon& d, int steps, int64_t per_rank, int64_t bucket_bytes,
                              afn::AllReduceAlgorithm algorithm) {
  auto m = build(100 + rank, true, bucket_bytes);  // different initial values: the broadcast makes them rank 0's
  auto group = afn::GlooGroup::create(group_options(rank, n, d, 20000, algorithm));
  REQUIRE(group.ok());
  af::SessionOptions so;
  so.collective_group = *group;
  so.step_timeout_ms = 30000;
  auto s = af::Session::create(m->g, so);
  REQUIRE(s.ok());
  REQUIRE(s->run_init().ok());
  af::Status formed = (*group)->form(Clock::now() + std::chrono::seconds(30));
  REQUIRE_MESSAGE(formed.ok(), formed.to_string());
  af::Status synced = s->run({}, {}, {m->sync}).status();
  REQUIRE_MESSAGE(synced.ok(), synced.to_string());
  for (int k = 0; k < steps; ++k) {
    af::Tensor x, y;
    batch((k * n + rank) * per_rank, per_rank, &x, &y);
    auto out = s->run({m->loss}, {{m->x, x}, {m->y, y}}, {m->train});
    REQUIRE_MESSAGE(out.ok(), out.status().to_string());
  }
  return values(*s, *m);
}

// One process on the combined batches: rank r's slice of step k is examples
// (k n + r) per_rank ..., so step k's combined batch is k n per_rank ... (k+1) n per_rank - 1.
std::vector<float> train_single(int n, int steps, int64_t per_rank) {
  auto m = build(100, false);
  auto s = af::Session::create(m->g);
  REQUIRE(s.ok());
  REQUIRE(s->run_init().ok());
  for (int k = 0; k < steps; ++k) {
    af::Tensor x, y;
    batch(k * n * per_rank, n * per_rank, &x, &y);
    REQUIRE(s->run({m->loss}, {{m->x, x}, {m->y, y}}, {m->train}).ok());
  }
  return values(*s, *m);
}

float max_difference(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  float worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::fabs(a[i] - b[i]));
  return worst;
}

void check_equal_to_single(int n, int64_t bucket_bytes,
                           afn::AllReduceAlgorithm algorithm = afn::AllReduceAlgorithm::automatic) {
  INFO(n, " ranks, ", afn::allreduce_algorithm_name(algorithm));
  auto d = start_store_daemon();
  const int steps = 6;
  const int64_t per_rank = 8;
  std::vector<std::future<std::vector<float>>> ranks;
  for (int r = 0; r < n; ++r)
    ranks.push_back(std::async(std::launch::async, [&, r] { return train_rank(r, n, *d, steps, per_rank, bucket_bytes, algorithm); }));
  std::vector<std::vector<float>> got;
  for (auto& f : ranks) got.push_back(f.get());
  auto single = train_single(n, steps, per_rank);
  for (int r = 0; r < n; ++r) {
    INFO("rank ", r, " of ", n);
    CHECK(max_difference(got[static_cast<size_t>(r)], single) <= 1e-5f);
    CHECK(max_difference(got[static_cast<size_t>(r)], got[0]) == 0.0f);  // replicas stay identical
  }
  // The model moved: the comparison is not between two untrained models.
  auto untrained = build(100, false);
  auto s = af::Session::create(untrained->g);
  REQUIRE(s->run_init().ok());
  CHECK(max_difference(values(*s, *untrained), single) > 1e-3f);
}

}  // namespace

TEST_CASE("SGD over 2 and 4 all-reducing ranks equals one process on the combined batch") {
  check_equal_to_single(2, 1 << 20);
  check_equal_to_single(4, 1 << 20);
}

TEST_CASE("both all-reduce algorithms give the combined batch's weights, at powers of 2 and not") {
  using A = afn::AllReduceAlgorithm;
  check_equal_to_single(2, 1 << 20, A::bcube);
  check_equal_to_single(3, 1 << 20, A::bcube);  // prime: one direct exchange with the others
  check_equal_to_single(3, 1 << 20, A::ring);
  check_equal_to_single(4, 1 << 20, A::ring);
  check_equal_to_single(6, 1 << 20, A::bcube);  // 2 x 3: a halving round, then a direct one
  check_equal_to_single(4, 0, A::bcube);        // a bucket per gradient: the bias's 3 floats over 4, one chunk empty
}

TEST_CASE("members that disagree on the algorithm do not form a group, and say who runs what") {
  auto d = start_store_daemon();
  using A = afn::AllReduceAlgorithm;
  // 3 members, `auto` meaning bcube there: rank 2 asks for the ring.
  std::vector<std::future<af::Status>> forms;
  for (int r = 0; r < 3; ++r)
    forms.push_back(std::async(std::launch::async, [&, r] {
      auto g = afn::GlooGroup::create(group_options(r, 3, *d, 3000, r == 2 ? A::ring : A::automatic));
      REQUIRE(g.ok());
      return (*g)->form(Clock::now() + std::chrono::seconds(6));
    }));
  std::vector<af::Status> got;
  for (auto& f : forms) got.push_back(f.get());
  for (int r : {0, 2}) {
    INFO("rank ", r, ": ", got[static_cast<size_t>(r)].to_string());
    CHECK(got[static_cast<size_t>(r)].code() == af::Code::failed_precondition);
    CHECK(got[static_cast<size_t>(r)].message().find("rank 2 (/job:worker/task:2") != std::string::npos);
    CHECK(got[static_cast<size_t>(r)].message().find("--allreduce_algorithm") != std::string::npos);
  }
  CHECK(got[0].message().find("rank 2 (/job:worker/task:2, daemon 127.0.0.1:" + std::to_string(d->port()) + ") runs ring") !=
        std::string::npos);
  CHECK_FALSE(got[1].ok());  // agrees with rank 0, but rank 0 never connects
}

TEST_CASE("the all-reduce algorithms' names") {
  using A = afn::AllReduceAlgorithm;
  CHECK(afn::parse_allreduce_algorithm("auto") == A::automatic);
  CHECK(afn::parse_allreduce_algorithm("ring") == A::ring);
  CHECK(afn::parse_allreduce_algorithm("bcube") == A::bcube);
  CHECK_FALSE(afn::parse_allreduce_algorithm("tree").has_value());
  CHECK(std::string(afn::allreduce_algorithm_name(A::bcube)) == "bcube");
  CHECK(std::string(afn::allreduce_algorithm_name(A::automatic)) == "auto");
}

TEST_CASE("every gradient in a bucket of its own gives the same weights") {
  auto m = build(1, true, 0);
  auto buckets = af::train::allreduce_buckets(m->g);
  REQUIRE(buckets.size() == 2);
  // The backward pass's order: the bias (last made, first reduced), then the weights.
  CHECK(buckets[0] == std::vector<std::string>{"b"});
  CHECK(buckets[1] == std::vector<std::string>{"w"});
  CHECK(af::train::allreduce_buckets(build(1, true, 1 << 20)->g).size() == 1);
  check_equal_to_single(2, 0);
}

TEST_CASE("a collective op in a session without a group fails its step saying so") {
  auto m = build(1, true);
  auto s = af::Session::create(m->g);
  REQUIRE(s.ok());
  REQUIRE(s->run_init().ok());
  af::Tensor x, y;
  batch(0, 4, &x, &y);
  auto out = s->run({m->loss}, {{m->x, x}, {m->y, y}}, {m->train});
  REQUIRE_FALSE(out.ok());
  CHECK(out.status().code() == af::Code::failed_precondition);
  CHECK(out.status().message().find("no collective group") != std::string::npos);
}

TEST_CASE("a lost member fails the others' step naming it, and the group forms again without stale state") {
  auto d = start_store_daemon();
  const int n = 3;
  const uint16_t gone = dead_port();
  std::vector<std::unique_ptr<Model>> models;
  std::vector<std::shared_ptr<afn::GlooGroup>> groups;
  std::vector<std::unique_ptr<af::Session>> sessions;
  auto make_rank = [&](int r) {
    auto m = build(100 + r, true);
    auto o = group_options(r, n, *d, 3000);
    o.member_daemons[2] = {"127.0.0.1", gone};  // rank 2's daemon: gone once it is
    auto g = afn::GlooGroup::create(o);
    REQUIRE(g.ok());
    af::SessionOptions so;
    so.collective_group = *g;
    so.step_timeout_ms = 4000;
    auto s = af::Session::create(m->g, so);
    REQUIRE(s.ok());
    REQUIRE(s->run_init().ok());
    models.push_back(std::move(m));
    groups.push_back(*g);
    sessions.push_back(std::make_unique<af::Session>(std::move(*s)));
  };
  for (int r = 0; r < n; ++r) make_rank(r);
  auto form_all = [&] {
    std::vector<std::future<af::Status>> f;
    for (int r = 0; r < n; ++r)
      f.push_back(std::async(std::launch::async, [&, r] {
        AF_RETURN_IF_ERROR(groups[static_cast<size_t>(r)]->form(Clock::now() + std::chrono::seconds(20)));
        return sessions[static_cast<size_t>(r)]->run({}, {}, {models[static_cast<size_t>(r)]->sync}).status();
      }));
    for (auto& x : f) {
      af::Status s = x.get();
      REQUIRE_MESSAGE(s.ok(), s.to_string());
    }
  };
  auto step = [&](int r) {
    af::Tensor x, y;
    batch(r * 4, 4, &x, &y);
    auto& m = *models[static_cast<size_t>(r)];
    return sessions[static_cast<size_t>(r)]->run({m.loss}, {{m.x, x}, {m.y, y}}, {m.train}).status();
  };
  form_all();
  const std::string first = groups[0]->generation();
  {
    std::vector<std::future<af::Status>> f;
    for (int r = 0; r < n; ++r) f.push_back(std::async(std::launch::async, step, r));
    for (auto& x : f) REQUIRE(x.get().ok());
  }
  // Rank 2 dies: its session and group go, and with them its sockets.
  sessions[2].reset();
  groups[2].reset();
  models[2].reset();
  auto t0 = Clock::now();
  std::vector<std::future<af::Status>> f;
  for (int r = 0; r < 2; ++r) f.push_back(std::async(std::launch::async, step, r));
  for (int r = 0; r < 2; ++r) {
    af::Status s = f[static_cast<size_t>(r)].get();
    INFO("rank ", r, ": ", s.to_string());
    CHECK_FALSE(s.ok());
    CHECK(s.message().find("/job:worker/task:2") != std::string::npos);
  }
  CHECK(Clock::now() - t0 < std::chrono::milliseconds(4000));  // within the step timeout
  // Every later op fails at once until the group forms again.
  t0 = Clock::now();
  CHECK_FALSE(step(0).ok());
  CHECK(Clock::now() - t0 < std::chrono::milliseconds(1000));
  // Rank 2 back (a new process: fresh graph, group and session); everyone forms a new
  // generation and trains on.
  sessions.resize(2);
  groups.resize(2);
  models.resize(2);
  make_rank(2);
  form_all();
  CHECK(groups[0]->generation() != first);
  CHECK(groups[2]->generation() == groups[0]->generation());
  std::vector<std::future<af::Status>> again;
  for (int r = 0; r < n; ++r) again.push_back(std::async(std::launch::async, step, r));
  for (auto& x : again) {
    af::Status s = x.get();
    CHECK_MESSAGE(s.ok(), s.to_string());
  }
  CHECK(max_difference(values(*sessions[0], *models[0]), values(*sessions[2], *models[2])) == 0.0f);
}

TEST_CASE("rank 0 keeps its generation open for a member that comes after the collective timeout") {
  auto d = start_store_daemon();
  std::vector<std::shared_ptr<afn::GlooGroup>> groups;
  for (int r = 0; r < 2; ++r) {
    auto g = afn::GlooGroup::create(group_options(r, 2, *d, 500));
    REQUIRE(g.ok());
    groups.push_back(*g);
  }
  auto first = std::async(std::launch::async, [g = groups[0]] { return g->form(Clock::now() + std::chrono::seconds(20)); });
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // three collective timeouts
  af::Status late = groups[1]->form(Clock::now() + std::chrono::seconds(20));
  af::Status early = first.get();
  REQUIRE_MESSAGE(early.ok(), early.to_string());
  REQUIRE_MESSAGE(late.ok(), late.to_string());
  // The first generation rank 0 published ("<incarnation>.1"): none was given up.
  CHECK(groups[0]->generation().ends_with(".1"));
  CHECK(groups[1]->generation() == groups[0]->generation());
}

TEST_CASE("a restarted member skips the generation that stands and joins the next at once") {
  auto d = start_store_daemon();
  constexpr int64_t kTimeoutMs = 3000;
  std::vector<std::shared_ptr<afn::GlooGroup>> groups;
  for (int r = 0; r < 2; ++r) {
    auto g = afn::GlooGroup::create(group_options(r, 2, *d, kTimeoutMs));
    REQUIRE(g.ok());
    groups.push_back(*g);
  }
  std::vector<std::future<af::Status>> formed;
  for (auto& g : groups) formed.push_back(std::async(std::launch::async, [g] { return g->form(Clock::now() + std::chrono::seconds(20)); }));
  for (auto& f : formed) REQUIRE(f.get().ok());
  const std::string standing = groups[0]->generation();
  // Rank 1 restarts (a fresh group) before rank 0 has seen it go: the generation in the
  // store is still the one that stands, its addresses rank 0's pairs already connected.
  groups[1].reset();
  auto g1 = afn::GlooGroup::create(group_options(1, 2, *d, kTimeoutMs));
  REQUIRE(g1.ok());
  groups[1] = *g1;
  const auto t0 = Clock::now();
  auto back = std::async(std::launch::async, [g = groups[1]] { return g->form(Clock::now() + std::chrono::seconds(20)); });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  af::Status again = groups[0]->form(Clock::now() + std::chrono::seconds(20));
  af::Status rejoined = back.get();
  REQUIRE_MESSAGE(again.ok(), again.to_string());
  REQUIRE_MESSAGE(rejoined.ok(), rejoined.to_string());
  CHECK(groups[0]->generation() != standing);
  CHECK(groups[1]->generation() == groups[0]->generation());
  // The store keeps the generation formed, not the one replaced.
  auto client = an::DaemonClient::connect("127.0.0.1", d->port(), kToken, "store reader", Clock::now() + std::chrono::seconds(5));
  REQUIRE(client.ok());
  auto get = [&](const std::string& key) {
    an::StoreRequestMsg m;
    m.space = "test";
    m.key = key;
    auto r = (*client)->store(m, Clock::now() + std::chrono::seconds(5));
    REQUIRE(r.ok());
    return r->status.code();
  };
  CHECK(get(standing + "/joined/0") == af::Code::not_found);
  CHECK(get(standing + "/formed") == af::Code::not_found);
  CHECK(get(groups[0]->generation() + "/joined/1") == af::Code::ok);
  CHECK(get(groups[0]->generation() + "/formed") == af::Code::ok);
  // Joining the standing generation would have waited out a connect timeout (or failed
  // at once, by chance of which side of each pair listens).
  CHECK(Clock::now() - t0 < std::chrono::milliseconds(kTimeoutMs));
}

TEST_CASE("a group that cannot form names the member that never joined") {
  auto d = start_store_daemon();
  const int n = 3;
  const uint16_t gone = dead_port();
  // Ranks 0 and 1 form a group of 3; rank 2 (its daemon gone) never comes. One attempt
  // each: the deadline is the collective timeout, so both fail on the same generation.
  std::vector<std::shared_ptr<afn::GlooGroup>> groups;
  for (int r = 0; r < 2; ++r) {
    auto o = group_options(r, n, *d, 1500);
    o.member_daemons[2] = {"127.0.0.1", gone};
    auto g = afn::GlooGroup::create(o);
    REQUIRE(g.ok());
    groups.push_back(*g);
  }
  const auto t0 = Clock::now();
  std::vector<std::future<af::Status>> formed;
  for (auto& g : groups)
    formed.push_back(std::async(std::launch::async, [g] { return g->form(Clock::now() + std::chrono::milliseconds(1500)); }));
  for (int r = 0; r < 2; ++r) {
    af::Status s = formed[static_cast<size_t>(r)].get();
    INFO("rank ", r, ": ", s.to_string());
    CHECK(s.code() == af::Code::deadline_exceeded);
    CHECK(s.message().find("rank 2 (/job:worker/task:2, daemon 127.0.0.1:" + std::to_string(gone) + ") never joined") !=
          std::string::npos);
    // The member present is not blamed.
    CHECK(s.message().find("/job:worker/task:" + std::to_string(1 - r)) == std::string::npos);
  }
  CHECK(Clock::now() - t0 < std::chrono::seconds(5));
}

// A Gloo device made on a thread of its own, which starts under `policy` and is named
// `name`: a thread starts with its creator's name, so the device's threads carry it too
// (other threads of the library may come and go meanwhile).
struct DeviceMade {
  bool set = false;                // the maker could take `policy`
  std::vector<int> with_device;    // the policies of the threads named `name` with the device
  std::vector<int> after;          // and once it is gone
  int maker_policy = -1;           // the maker's, with the device
};

DeviceMade make_device_under(int policy, const char* name) {
  return std::async(std::launch::async, [=] {
    DeviceMade m;
    sched_param p{};
    m.set = sched_setscheduler(0, policy, &p) == 0;
    pthread_setname_np(pthread_self(), name);
    {
      auto device = afn::make_gloo_device("127.0.0.1");
      m.with_device = aft::policies_of_threads_named(getpid(), name);
      m.maker_policy = sched_getscheduler(0);
    }
    m.after = aft::policies_of_threads_named(getpid(), name);
    return m;
  }).get();
}

TEST_CASE("Gloo's loop thread runs under SCHED_BATCH, and the thread that made it keeps its policy") {
  // From SCHED_OTHER, whatever policy this test was started with.
  auto made = make_device_under(SCHED_OTHER, "gloo-maker");
  REQUIRE(made.set);
  // The maker, and the device's one thread, its event loop, under SCHED_BATCH.
  CHECK(made.with_device.size() == 2);
  CHECK(std::count(made.with_device.begin(), made.with_device.end(), SCHED_BATCH) == 1);
  CHECK(made.maker_policy == SCHED_OTHER);
  CHECK(made.after == std::vector<int>{SCHED_OTHER});
  // A caller under another policy is left alone, and so is the loop it makes. In a thread
  // of its own: leaving SCHED_IDLE needs a nice limit an unprivileged test may not have.
  auto idle = make_device_under(SCHED_IDLE, "gloo-idle-maker");
  REQUIRE(idle.set);
  CHECK(idle.with_device == std::vector<int>{SCHED_IDLE, SCHED_IDLE});
  CHECK(idle.maker_policy == SCHED_IDLE);
}

TEST_CASE("the process's TCP counters see bytes cross a socket") {
  auto d = start_store_daemon();
  auto groups = formed_groups(2, *d);
  // The counters of open sockets: measured while the groups' pairs are open.
  auto before = afn::process_tcp_bytes();
  // One all-reduce of 1 MiB between two ranks: each sends half of it twice (reduce-scatter
  // then all-gather), 1 MiB in all, and receives as much.
  std::vector<af::Tensor> outs;
  std::vector<std::promise<af::Status>> done(2);
  for (int r = 0; r < 2; ++r) {
    af::Tensor in(af::DType::f32, af::Shape{256 * 1024}), out(af::DType::f32, af::Shape{256 * 1024});
    for (int64_t i = 0; i < in.num_elements(); ++i) in.data<float>()[i] = static_cast<float>(r + 1);
    outs.push_back(out);
    groups[static_cast<size_t>(r)]->all_reduce({in}, {out}, 0, 1, false,
                                               [&done, r](af::Status s) { done[static_cast<size_t>(r)].set_value(s); });
  }
  for (auto& p : done) REQUIRE(p.get_future().get().ok());
  auto after = afn::process_tcp_bytes();
  for (auto& out : outs) CHECK(out.data<float>()[12345] == 3.0f);
  for (auto& g : groups) CHECK(g->bytes_sent() == 1024u * 1024u);
  // Both ranks are this process: it sent and received both ranks' bytes.
  CHECK(after.acked - before.acked >= 2u * 1024u * 1024u);
  CHECK(after.acked - before.acked < 2u * 1024u * 1024u * 105u / 100u);
  CHECK(after.received - before.received >= 2u * 1024u * 1024u);
  // Per socket: the pairs closed since a reading take nothing away (the process-wide sums
  // would go down), and sockets opened since count whole.
  auto sockets = afn::tcp_socket_bytes();
  CHECK(sockets.size() >= 2);
  groups.clear();
  auto since = afn::tcp_bytes_between(sockets, afn::tcp_socket_bytes());
  CHECK(since.acked < 64u * 1024u);
  CHECK(since.received < 64u * 1024u);
}

TEST_CASE("outputs laid out in one buffer are reduced there: the averages, and only the tensors' bytes counted") {
  auto d = start_store_daemon();
  auto groups = formed_groups(2, *d);
  // Three gradients as CollectiveAllReduce's kernel lays out its outputs: 64-byte aligned
  // pieces of one buffer, with gaps (here NaN, which must not reach the sums); and the
  // same inputs into outputs of their own.
  const std::vector<int64_t> sizes = {5, 17, 1000};
  const std::vector<size_t> offsets = {0, 64, 192};
  std::vector<std::shared_ptr<af::Buffer>> buffers;
  std::vector<std::vector<af::Tensor>> fused(2), separate(2);
  std::vector<std::promise<af::Status>> done(4);
  for (int r = 0; r < 2; ++r) {
    auto buffer = std::make_shared<af::Buffer>(af::cpu_allocator(), 192 + 1000 * sizeof(float));
    float* raw = static_cast<float*>(buffer->data());
    std::fill(raw, raw + 48 + 1000, std::nanf(""));
    buffers.push_back(buffer);
    std::vector<af::Tensor> in;
    for (size_t i = 0; i < sizes.size(); ++i) {
      af::Tensor t(af::DType::f32, af::Shape{sizes[i]});
      for (int64_t j = 0; j < sizes[i]; ++j) t.data<float>()[j] = static_cast<float>((r + 1) * (j + 1) + i);
      in.push_back(t);
      fused[static_cast<size_t>(r)].emplace_back(af::DType::f32, af::Shape{sizes[i]}, buffer, offsets[i]);
      separate[static_cast<size_t>(r)].emplace_back(af::DType::f32, af::Shape{sizes[i]});
    }
    auto& g = groups[static_cast<size_t>(r)];
    g->all_reduce(in, fused[static_cast<size_t>(r)], 0, 2, true,
                  [&done, r](af::Status s) { done[static_cast<size_t>(r)].set_value(s); });
    g->all_reduce(in, separate[static_cast<size_t>(r)], 1, 2, true,
                  [&done, r](af::Status s) { done[static_cast<size_t>(2 + r)].set_value(s); });
  }
  for (auto& p : done) REQUIRE(p.get_future().get().ok());
  for (int r = 0; r < 2; ++r) {
    for (size_t i = 0; i < sizes.size(); ++i) {
      const af::Tensor& f = fused[static_cast<size_t>(r)][i];
      for (int64_t j = 0; j < sizes[i]; ++j) {
        CHECK(f.data<float>()[j] == static_cast<float>((3 * (j + 1) + 2 * static_cast<int64_t>(i))) / 2.0f);
        CHECK(f.data<float>()[j] == separate[static_cast<size_t>(r)][i].data<float>()[j]);
      }
    }
    // The gaps were zeroed before the sums (NaN would have stayed).
    const float* raw = static_cast<const float*>(buffers[static_cast<size_t>(r)]->data());
    for (size_t k : {5u, 63u / 4u, 16u + 17u, 47u}) CHECK(raw[k] == 0.0f);
  }
  // Both all-reduces count the 1,022 floats once each between two ranks.
  for (auto& g : groups) CHECK(g->bytes_sent() == 2u * 1022u * sizeof(float));
}

TEST_CASE("the rendezvous store bounds what a peer may put in it") {
  an::StoreService store;
  auto ask = [&](bool set, std::string space, std::string key, std::string value = {}) {
    an::StoreRequestMsg m;
    m.request_id = 7;
    m.set = set;
    m.space = std::move(space);
    m.key = std::move(key);
    m.value = std::move(value);
    return store.handle(m);
  };
  CHECK(ask(true, "job", "k", "v").status.ok());
  auto got = ask(false, "job", "k");
  CHECK(got.status.ok());
  CHECK(got.value == "v");
  CHECK(got.request_id == 7);
  // Namespaces never meet; a missing key is not_found (the member polls).
  CHECK(ask(false, "other", "k").status.code() == af::Code::not_found);
  // Lengths from the wire are bounded.
  CHECK(ask(true, "", "k", "v").status.code() == af::Code::invalid_argument);
  CHECK(ask(true, "job", "").status.code() == af::Code::invalid_argument);
  CHECK(ask(true, std::string(an::StoreService::kMaxSpaceBytes + 1, 's'), "k").status.code() == af::Code::invalid_argument);
  CHECK(ask(true, "job", std::string(an::StoreService::kMaxKeyBytes + 1, 'k')).status.code() == af::Code::invalid_argument);
  CHECK(ask(true, "job", "big", std::string(an::StoreService::kMaxValueBytes + 1, 'v')).status.code() ==
        af::Code::invalid_argument);
  // A set overwrites: the same key never grows the store.
  for (int i = 0; i < 100; ++i) REQUIRE(ask(true, "job", "same", std::string(1000, 'x')).status.ok());
  CHECK(store.entries() == 2);
  // So do the totals: 64 values of 1 MiB fill it; the next new key is refused.
  af::Status last;
  int stored = 0;
  for (int i = 0; i < 100 && last.ok(); ++i) {
    last = ask(true, "job", "v" + std::to_string(i), std::string(an::StoreService::kMaxValueBytes, 'v')).status;
    if (last.ok()) ++stored;
  }
  CHECK(last.code() == af::Code::resource_exhausted);
  CHECK(stored < 64);
  CHECK(stored >= 60);
  CHECK(ask(false, "job", "k").value == "v");  // what it holds stays
  // Erasing by prefix frees what the keys held: the big values fit again.
  an::StoreRequestMsg erase;
  erase.erase_prefix = true;
  erase.space = "job";
  erase.key = "v";
  auto erased = store.handle(erase);
  CHECK(erased.status.ok());
  CHECK(erased.value == std::to_string(stored));
  CHECK(ask(false, "job", "k").value == "v");  // another prefix stays
  CHECK(ask(false, "job", "v0").status.code() == af::Code::not_found);
  CHECK(ask(true, "job", "v0", std::string(an::StoreService::kMaxValueBytes, 'v')).status.ok());
  CHECK(store.entries() == 3);
}
