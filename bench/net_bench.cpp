// Network benchmarks: ours through real actorflow-node daemons (child
// processes on 127.0.0.1, port 0), against the in-process and loopback peers measured in
// the same run (TensorFlow's gRPC runtime is bench/python/tf_net_peer.py):
//
//   wire_throughput_4MiB, wire_throughput_64MiB  GB/s: an f32 variable on
//     /job:worker/task:0 whose value a Slice on /job:worker/task:1 consumes each step, so
//     the whole tensor crosses the daemon-to-daemon edge once per step (the client fetches
//     one element). Peer: iperf3 (Debian) on loopback, one TCP stream.
//   remote_step_latency  us: x + 1 on a fed f32 scalar, the whole graph on one daemon
//     (af://127.0.0.1:P), Session::run. Peer: a plain Asio echo of 128 bytes (blocking
//     client, server on its own thread, TCP_NODELAY both ends).
//
// A sample of the latency case is the median of `reps` round trips; of a wire case, the
// bytes moved over the time of `reps` steps.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <actorflow/actorflow.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>


#include <asio.hpp>

#include "../tests/common/child_process.h"
#include "harness/bench.h"

namespace af = actorflow;

namespace {

const char* kToken = "bench-net-token-0123";

std::string self_dir() {
  std::array<char, 4096> buf{};
  ssize_t n = ::readlink("/proc/self/exe", buf.data(), buf.size() - 1);
  std::string p(buf.data(), n > 0 ? static_cast<size_t>(n) : 0);
  return p.substr(0, p.rfind('/'));
}
std::string daemon_binary() { return self_dir() + "/../tools/actorflow-node"; }

// One actorflow-node on 127.0.0.1 (port 0, --port_file), token in its environment,
// killed with the Daemon (and with this process: PR_SET_PDEATHSIG).
struct Daemon {
  std::unique_ptr<aft::ChildProcess> p;
  Daemon() {
    auto env = aft::environment_without({"ACTORFLOW_TOKEN", "TF_CONFIG=", "SLURM_", "OMPI_"});
    env.push_back(std::string("ACTORFLOW_TOKEN=") + kToken);
    p = std::make_unique<aft::ChildProcess>(
        "af_bench_net", std::vector<std::string>{daemon_binary(), "--host", "127.0.0.1", "--port", "0"}, env, false,
        std::chrono::seconds(30));
    if (!p->started()) throw std::runtime_error("actorflow-node did not start: " + p->log());
  }
  std::string target() const { return "af://127.0.0.1:" + std::to_string(p->port()); }
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// ---- wire_throughput ----
struct WireFixture {
  std::optional<Daemon> d0, d1;
  af::Graph g;
  af::Output y;
  std::optional<af::Session> sess;
};

std::string free_port() {
  int s = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof a;
  if (::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    ::close(s);
    throw std::runtime_error("no free port");
  }
  ::close(s);
  return std::to_string(ntohs(a.sin_port));
}

bool have_iperf3() { return std::system("command -v iperf3 >/dev/null 2>&1") == 0; }

// An iperf3 server on 127.0.0.1 (one stream at a time), killed with the object.
struct Iperf3Server {
  pid_t pid = -1;
  std::string port;
  Iperf3Server() {
    port = free_port();
    pid_t parent = ::getpid();
    pid = ::fork();
    if (pid == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(127);
      FILE* null = std::fopen("/dev/null", "w");
      if (null) ::dup2(fileno(null), 1), ::dup2(fileno(null), 2);
      ::execlp("iperf3", "iperf3", "-s", "-B", "127.0.0.1", "-p", port.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
  ~Iperf3Server() {
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      int st = 0;
      ::waitpid(pid, &st, 0);
    }
  }
  // One client run of `bytes`; iperf3's own receiver-side figure, in GB/s (1e9 B/s).
  double run(int64_t bytes) const {
    std::string cmd = "iperf3 -c 127.0.0.1 -p " + port + " -n " + std::to_string(bytes) + " -J 2>&1";
    std::string out;
    for (int attempt = 0; attempt < 3; ++attempt) {
      out.clear();
      FILE* f = ::popen(cmd.c_str(), "r");
      if (!f) throw std::runtime_error("popen iperf3");
      std::array<char, 4096> buf{};
      size_t n;
      while ((n = std::fread(buf.data(), 1, buf.size(), f)) > 0) out.append(buf.data(), n);
      ::pclose(f);
      auto at = out.find("\"sum_received\"");
      if (at != std::string::npos) {
        auto b = out.find("\"bits_per_second\"", at);
        if (b != std::string::npos) {
          b = out.find(':', b);
          return std::strtod(out.c_str() + b + 1, nullptr) / 8 / 1e9;
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(200));  // server busy: retry
    }
    throw std::runtime_error("iperf3 gave no result: " + out.substr(0, 400));
  }
};

bench::Prepared wire(const bench::Params& p) {
  const int64_t bytes = p.at("bytes");
  const int reps = static_cast<int>(p.at("reps"));
  const int64_t n = bytes / 4;
  ::setenv("ACTORFLOW_TOKEN", kToken, 1);
  auto f = std::make_shared<WireFixture>();
  f->d0.emplace();
  f->d1.emplace();
  af::Output v;
  {
    af::DeviceScope s(f->g, "/job:worker/task:0");
    v = af::variable(f->g, af::Shape{n}, af::constant_initializer(1.5), "payload");
  }
  {
    af::DeviceScope s(f->g, "/job:worker/task:1");
    f->y = af::slice(v, {0}, {1}, "take_one");
  }
  af::SessionOptions opts;
  opts.intra_op_threads = bench::threads();
  opts.step_timeout_ms = 120000;
  std::string target = "/job:worker/task:0=" + f->d0->target() + ",/job:worker/task:1=" + f->d1->target();
  auto sess = af::Session::create(f->g, target, opts);
  bench::must(sess, "cluster session " + target);
  f->sess.emplace(std::move(sess).value());
  auto init = f->sess->run_init();
  if (!init.ok()) throw std::runtime_error("run_init: " + init.to_string());
  bench::Prepared prep;
  prep.sides.push_back(
      {"ours",
       "2 actorflow-node daemons on loopback (AF_NUM_THREADS=" + std::to_string(bench::threads()) +
           " each), the client in this process; Session::run fetching 1 element",
       [f, bytes, reps] {
         af::Result<std::vector<af::Tensor>> out = std::vector<af::Tensor>{};
         auto t0 = bench::Clock::now();
         for (int r = 0; r < reps; ++r) {
           out = f->sess->run({f->y});
           bench::must(out, "wire step");
         }
         double s = bench::seconds_since(t0);
         bench::check(bench::must(out, "wire step")[0].to_vector<float>().at(0) == 1.5f, "payload value");
         return static_cast<double>(bytes) * reps / s / 1e9;
       }});
  if (have_iperf3()) {
    auto srv = std::make_shared<Iperf3Server>();
    // At least 256 MiB per iperf3 run: shorter runs are dominated by its own setup.
    int64_t total = std::max<int64_t>(bytes * reps, int64_t{256} << 20);
    prep.sides.push_back({"iperf3", "iperf3 -c 127.0.0.1 -n " + std::to_string(total) + " (1 TCP stream, receiver's figure)",
                          [srv, total] { return srv->run(total); }});
  } else {
    std::cerr << "SKIP wire_throughput vs iperf3: iperf3 is not installed (scripts/install-deps.sh installs it)\n";
  }
  return prep;
}

// ---- remote_step_latency ----
// With AF_BENCH_CPU set, each sample also prints its mean wall time and the CPU time of the
// calling thread (and of the daemon, in clock ticks) per step: where a step's time goes.
double thread_cpu_us() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) / 1e3;
}
double wall_us() { return bench::seconds_since(bench::Clock::time_point{}) * 1e6; }
// utime + stime of a process, from /proc (clock ticks).
double process_cpu_us(pid_t pid) {
  std::FILE* f = std::fopen(("/proc/" + std::to_string(pid) + "/stat").c_str(), "r");
  if (!f) return 0;
  char buf[1024] = {};
  size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  std::string s(buf, n);
  size_t p = s.rfind(')');
  unsigned long ut = 0, st = 0;
  if (p != std::string::npos)
    std::sscanf(s.c_str() + p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st);
  return static_cast<double>(ut + st) * 1e6 / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

struct LatencyFixture {
  std::optional<Daemon> d;
  af::Graph g;
  af::Output x, y;
  std::optional<af::Session> sess;
};

// A blocking Asio echo server on its own thread (one connection) and its client.
struct Echo {
  static constexpr size_t kBytes = 128;
  asio::io_context io;
  asio::ip::tcp::acceptor acc{io, asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)};
  asio::ip::tcp::socket client{io};
  std::thread server;
  std::array<char, kBytes> msg{}, back{};
  Echo() {
    auto port = acc.local_endpoint().port();
    server = std::thread([this] {
      asio::ip::tcp::socket s(io);
      acc.accept(s);
      s.set_option(asio::ip::tcp::no_delay(true));
      std::array<char, kBytes> buf{};
      asio::error_code ec;
      for (;;) {
        asio::read(s, asio::buffer(buf), ec);
        if (ec) return;
        asio::write(s, asio::buffer(buf), ec);
        if (ec) return;
      }
    });
    client.connect(asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
    client.set_option(asio::ip::tcp::no_delay(true));
    for (size_t i = 0; i < kBytes; ++i) msg[i] = static_cast<char>(i);
  }
  ~Echo() {
    asio::error_code ec;
    client.shutdown(asio::ip::tcp::socket::shutdown_both, ec);
    client.close(ec);
    server.join();
  }
  void round_trip() {
    asio::write(client, asio::buffer(msg));
    asio::read(client, asio::buffer(back));
  }
};

bench::Prepared latency(const bench::Params& p) {
  const int reps = static_cast<int>(p.at("reps"));
  ::setenv("ACTORFLOW_TOKEN", kToken, 1);
  auto f = std::make_shared<LatencyFixture>();
  f->d.emplace();
  f->x = af::placeholder(f->g, af::f32, {}, "x");
  f->y = f->x + af::constant(f->g, 1.0f, "one");
  af::SessionOptions opts;
  opts.intra_op_threads = bench::threads();
  opts.step_timeout_ms = 60000;
  auto sess = af::Session::create(f->g, f->d->target(), opts);
  bench::must(sess, "remote session");
  f->sess.emplace(std::move(sess).value());
  auto in = af::Tensor::scalar(2.0f);
  bench::Prepared prep;
  prep.sides.push_back({"ours",
                        "1 actorflow-node daemon on loopback (AF_NUM_THREADS=" + std::to_string(bench::threads()) +
                            "), Session::run(y, {x: 2}); a sample is the median of " + std::to_string(reps) + " runs",
                        [f, in, reps] {
                          std::vector<double> t(static_cast<size_t>(reps));
                          af::Result<std::vector<af::Tensor>> out = std::vector<af::Tensor>{};
                          double c0 = thread_cpu_us(), d0 = process_cpu_us(f->d->p->pid()), w0 = wall_us();
                          for (int r = 0; r < reps; ++r) {
                            auto t0 = bench::Clock::now();
                            out = f->sess->run({f->y}, {{f->x, in}});
                            t[static_cast<size_t>(r)] = bench::seconds_since(t0) * 1e6;
                            bench::must(out, "remote step");
                          }
                          if (std::getenv("AF_BENCH_CPU"))
                            std::fprintf(stderr, "# per step: wall %.1f us (mean), caller cpu %.1f us, daemon cpu %.1f us\n",
                                         (wall_us() - w0) / reps, (thread_cpu_us() - c0) / reps,
                                         (process_cpu_us(f->d->p->pid()) - d0) / reps);
                          bench::check(bench::must(out, "remote step")[0].item<float>() == 3.0f, "x + 1");
                          return median(t);
                        }});
  auto echo = std::make_shared<Echo>();
  prep.sides.push_back({"asio-echo",
                        "blocking Asio client, server thread in this process, 128 B each way, TCP_NODELAY; median of " +
                            std::to_string(reps),
                        [echo, reps] {
                          std::vector<double> t(static_cast<size_t>(reps));
                          double c0 = thread_cpu_us(), w0 = wall_us();
                          for (int r = 0; r < reps; ++r) {
                            auto t0 = bench::Clock::now();
                            echo->round_trip();
                            t[static_cast<size_t>(r)] = bench::seconds_since(t0) * 1e6;
                          }
                          if (std::getenv("AF_BENCH_CPU"))
                            std::fprintf(stderr, "# echo per round trip: wall %.1f us (mean), caller cpu %.1f us\n",
                                         (wall_us() - w0) / reps, (thread_cpu_us() - c0) / reps);
                          bench::check(echo->back == echo->msg, "echo bytes");
                          return median(t);
                        }});
  return prep;
}

BENCH_CASE(bench::Case{.name = "wire_throughput_4MiB",
                       .unit = "GB/s",
                       .higher_is_better = true,
                       .work = "a 4 MiB f32 variable on /job:worker/task:0 consumed by a Slice on /job:worker/task:1 "
                               "(two actorflow-node daemons on loopback), bytes per second of steps",
                       .params = [](bool quick) {
                         return bench::Params{{{"bytes", int64_t{4} << 20}, {"reps", quick ? 16 : 32}},
                                              {{"kind", "wire_throughput"}}};
                       },
                       .prepare = wire,
                       .note = "goals: >= 0.8x iperf3, >= 2x TensorFlow gRPC"});

BENCH_CASE(bench::Case{.name = "wire_throughput_64MiB",
                       .unit = "GB/s",
                       .higher_is_better = true,
                       .work = "a 64 MiB f32 variable on /job:worker/task:0 consumed by a Slice on /job:worker/task:1 "
                               "(two actorflow-node daemons on loopback), bytes per second of steps",
                       .params = [](bool quick) {
                         return bench::Params{{{"bytes", int64_t{64} << 20}, {"reps", quick ? 2 : 4}},
                                              {{"kind", "wire_throughput"}}};
                       },
                       .prepare = wire,
                       .note = "goals: >= 0.8x iperf3, >= 2x TensorFlow gRPC"});

BENCH_CASE(bench::Case{.name = "remote_step_latency",
                       .unit = "us",
                       .higher_is_better = false,
                       .work = "one run of x + 1 on a fed f32 scalar on an actorflow-node daemon over loopback "
                               "(median of the runs of a sample)",
                       .params = [](bool quick) {
                         return bench::Params{{{"reps", quick ? 100 : 200}}, {{"kind", "remote_step_latency"}}};
                       },
                       .prepare = latency,
                       .note = "goals: <= 0.25x TensorFlow's remote session.run, <= 2x the Asio echo"});

}  // namespace

int main(int argc, char** argv) {
  ::signal(SIGPIPE, SIG_IGN);
  return bench::main(argc, argv);
}
