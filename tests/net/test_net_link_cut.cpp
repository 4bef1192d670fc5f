// A link is cut, for real: a ps daemon runs inside one network
// namespace this test creates, a worker daemon and the client (this process, which enters
// it) inside another, the two joined by a veth pair (10.200.X.Y/30). Both ends and both
// addresses live in the test's own namespaces: no traffic and no address touch the host's
// network. Setting the ps namespace's end of the link down makes the ps unreachable with no RST, no FIN and no ICMP: packets vanish, as
// with a pulled cable. Then
//   - a step with a long deadline fails once the heartbeats notice (--peer_timeout_ms),
//     naming the ps, instead of waiting out its deadline;
//   - a step with a short deadline fails by that deadline (connecting to the ps hangs);
//   - every side logs the lost peer (the ps its client and its peer daemon, the worker
//     daemon its dial to the ps);
//   - once the link is up again, steps run again with no process restarted: the client
//     registers afresh, the worker daemon dials the ps again and logs that it is back.
// Needs root and `ip` (iproute2) with network namespaces and veth; without them it skips
// (exit 77) and says why. Every process it starts dies with it (PR_SET_PDEATHSIG, and the
// destructors kill them); the namespaces, and with them both ends of the veth pair, are
// deleted on every exit path, and namespaces left by a test that was killed are removed at start.
#include <doctest/doctest.h>

#include <actorflow/actorflow.h>
#include <actorflow/net/daemon.h>

#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "interop/skip.h"
#include "test_net_daemon_process.h"

namespace af = actorflow;
namespace afn = actorflow::net;
using Clock = std::chrono::steady_clock;

namespace {

const char* kToken = "link-cut-test-token";
constexpr int kHeartbeatMs = 250;
constexpr int kPeerTimeoutMs = 2000;
const char* kNsPrefix = "afcut_";

std::string ip_binary() {
  for (const char* p : {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"})
    if (::access(p, X_OK) == 0) return p;
  return "";
}

// Runs `cmd` through the shell; its exit status, and its output in *out.
int sh(const std::string& cmd, std::string* out = nullptr) {
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return -1;
  char buf[512];
  std::string text;
  while (size_t n = std::fread(buf, 1, sizeof buf, p)) text.append(buf, n);
  int rc = ::pclose(p);
  if (out) *out = text;
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

// Namespaces named afcut_<pid> whose test process is gone (killed before its cleanup).
void remove_stale_namespaces(const std::string& ip) {
  DIR* d = ::opendir("/run/netns");
  if (!d) return;
  std::vector<std::string> stale;
  while (dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name.rfind(kNsPrefix, 0) != 0) continue;
    pid_t pid = static_cast<pid_t>(std::atol(name.c_str() + std::string(kNsPrefix).size()));
    if (pid > 0 && ::kill(pid, 0) != 0 && errno == ESRCH) stale.push_back(name);
  }
  ::closedir(d);
  for (auto& n : stale) sh(ip + " netns del " + n);
}

// Two namespaces joined by a veth pair: `ns` holds the ps, `client_ns` the worker daemon
// and this process (entered by make()). Deleting the namespaces deletes the pair.
struct CutLink {
  std::string ip, ns, client_ns, outside, inside, outside_addr, inside_addr;
  bool made = false;
  int root_ns_fd = -1;  // this process's own namespace, entered again on the way out

  // Empty on success, else why it could not be set up.
  std::string make() {
    ip = ip_binary();
    if (ip.empty()) return "no ip (iproute2) binary";
    if (::geteuid() != 0) return "not root: network namespaces need CAP_NET_ADMIN";
    remove_stale_namespaces(ip);
    pid_t pid = ::getpid();
    ns = kNsPrefix + std::to_string(pid);
    client_ns = ns + "_client";
    outside = "afc" + std::to_string(pid) + "o";
    inside = "afc" + std::to_string(pid) + "i";
    // A /30 of our own in 10.200.0.0/16, picked by pid, set only on the veth pair between
    // the two namespaces made here: no interface of this machine's own namespace has it,
    // and every socket that uses it is opened inside those namespaces (the daemons run
    // under `ip netns exec`; this thread enters client_ns below before it connects, and
    // the clients' io threads it starts then are born there). Both
    // addresses have as many digits, so the worker's (.1) sorts below the ps's (.2) and
    // the worker daemon dials.
    int third = pid % 256, base = 4 * (3 + (pid / 256) % 60);
    std::string net = "10.200." + std::to_string(third) + ".";
    outside_addr = net + std::to_string(base + 1);
    inside_addr = net + std::to_string(base + 2);
    std::string out;
    if (sh(ip + " netns add " + ns, &out) != 0) return "ip netns add failed: " + out;
    made = true;
    if (sh(ip + " netns add " + client_ns, &out) != 0) return "ip netns add failed: " + out;
    for (const std::string& cmd :
         {ip + " -n " + client_ns + " link add " + outside + " type veth peer name " + inside + " netns " + ns,
          ip + " -n " + client_ns + " addr add " + outside_addr + "/30 dev " + outside,
          ip + " -n " + client_ns + " link set " + outside + " up", ip + " -n " + client_ns + " link set lo up",
          ip + " -n " + ns + " addr add " + inside_addr + "/30 dev " + inside,
          ip + " -n " + ns + " link set " + inside + " up", ip + " -n " + ns + " link set lo up"})
      if (sh(cmd, &out) != 0) return "'" + cmd + "' failed: " + out;
    // This thread (the client's sockets and every thread it starts from now on) joins the
    // client namespace.
    root_ns_fd = ::open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    int client_fd = ::open(("/run/netns/" + client_ns).c_str(), O_RDONLY | O_CLOEXEC);
    if (root_ns_fd < 0 || client_fd < 0) {
      std::string why = std::strerror(errno);
      if (client_fd >= 0) ::close(client_fd);
      return "cannot open the namespaces: " + why;
    }
    int rc = ::setns(client_fd, CLONE_NEWNET);
    ::close(client_fd);
    if (rc != 0) return "setns into " + client_ns + " failed: " + std::string(std::strerror(errno));
    return "";
  }
  // The namespace's end down or up: packets to the ps are dropped without a word.
  void set_inside(bool up) {
    std::string out;
    int rc = sh(ip + " -n " + ns + " link set " + inside + (up ? " up" : " down"), &out);
    REQUIRE_MESSAGE(rc == 0, out);
  }
  ~CutLink() {
    if (root_ns_fd >= 0) {
      (void)::setns(root_ns_fd, CLONE_NEWNET);
      ::close(root_ns_fd);
    }
    if (!made) return;
    sh(ip + " netns del " + ns);
    sh(ip + " netns del " + client_ns);
  }
};

// actorflow-node on `host`, optionally run through `ip netns exec NS` (which execs it: the
// pid is the daemon's, so the destructor's SIGKILL reaches it).
class NodeProcess : public aft::ChildProcess {
 public:
  NodeProcess(std::vector<std::string> prefix, const std::string& host, const std::string& job)
      : aft::ChildProcess("af_linkcut", args(std::move(prefix), host, job), env(), false, std::chrono::seconds(30)),
        host_(host) {}
  std::string address() const { return host_ + ":" + std::to_string(port()); }

 private:
  static std::vector<std::string> args(std::vector<std::string> a, const std::string& host, const std::string& job) {
    for (const std::string& s :
         {aftnet::daemon_binary(), std::string("--host"), host, std::string("--port"), std::string("0"),
          std::string("--job_name"), job, std::string("--heartbeat_ms"), std::to_string(kHeartbeatMs),
          std::string("--peer_timeout_ms"), std::to_string(kPeerTimeoutMs),
          // The veth pair is this test's own: a network no one else reaches.
          std::string("--trusted_network")})
      a.push_back(s);
    return a;
  }
  static std::vector<std::string> env() {
    auto e = aft::environment_without({"ACTORFLOW_", "TF_CONFIG=", "SLURM_", "OMPI_"});
    e.push_back(std::string("ACTORFLOW_TOKEN=") + kToken);
    return e;
  }
  std::string host_;
};

bool names_ps(const af::Status& s, const std::string& ps_address) {
  return s.message().find("/job:ps/task:0") != std::string::npos || s.message().find(ps_address) != std::string::npos;
}

}  // namespace

TEST_CASE("needs root and ip netns: a cut link fails steps by their deadline, and they run again once it heals") {
  REQUIRE_MESSAGE(aftnet::daemon_built(), aftnet::daemon_binary() << " is not built (it is built with this test)");
  CutLink link;
  std::string why = link.make();
  if (!why.empty()) aft::skip("skipped: cannot make a network namespace with a veth pair: " + why, "AF_REQUIRE_NETNS");

  NodeProcess ps({link.ip, "netns", "exec", link.ns}, link.inside_addr, "ps");
  NodeProcess worker({link.ip, "netns", "exec", link.client_ns}, link.outside_addr, "worker");
  auto logs = [&] { return "--- ps:\n" + ps.log() + "--- worker:\n" + worker.log(); };
  REQUIRE_MESSAGE(ps.started(), logs());
  REQUIRE_MESSAGE(worker.started(), logs());

  // This process is the client: its connections beat and time out like the daemons'.
  afn::set_client_heartbeat(kHeartbeatMs, kPeerTimeoutMs);
  aftnet::ScopedEnv token("ACTORFLOW_TOKEN", kToken);
  af::Graph g;
  af::Output x, y;
  {
    af::DeviceScope d(g, "/job:worker/task:0");
    x = af::placeholder(g, af::f32, {2}, "x");
  }
  {
    af::DeviceScope d(g, "/job:ps/task:0");
    y = af::tanh(x, "on_ps");
  }
  {
    af::DeviceScope d(g, "/job:worker/task:0");
    y = af::identity(y * 2.0, "back_on_worker");
  }
  const std::string target = "/job:worker/task:0=af://" + worker.address() + ",/job:ps/task:0=af://" + ps.address();
  af::SessionOptions long_opts, short_opts;
  long_opts.step_timeout_ms = 15000;
  short_opts.step_timeout_ms = 3000;
  auto s_long = af::Session::create(g, target, long_opts);
  auto s_short = af::Session::create(g, target, short_opts);
  REQUIRE(s_long.ok());
  REQUIRE(s_short.ok());
  af::Tensor in = af::Tensor::from_vector(std::vector<float>{0.5f, -1}, {2});
  const float want0 = 2 * std::tanh(0.5f);
  for (int i = 0; i < 3; ++i) {
    auto a = s_long->run({y}, {{x, in}});
    REQUIRE_MESSAGE(a.ok(), a.status().to_string() << "\n" << logs());
    CHECK(a->at(0).to_vector<float>().at(0) == doctest::Approx(want0));
    auto b = s_short->run({y}, {{x, in}});
    REQUIRE_MESSAGE(b.ok(), b.status().to_string() << "\n" << logs());
  }

  // Cut. A step with 15 s to go fails once the client's heartbeat check gives up on the
  // ps: within the peer timeout (plus a heartbeat interval and slack on a loaded VM).
  link.set_inside(false);
  auto t0 = Clock::now();
  auto r = s_long->run({y}, {{x, in}});
  auto took = Clock::now() - t0;
  REQUIRE_FALSE(r.ok());
  INFO("the step on the cut link: " << r.status().to_string());
  CHECK(took < std::chrono::milliseconds(kPeerTimeoutMs + kHeartbeatMs + 1500));
  CHECK(names_ps(r.status(), ps.address()));
  CHECK(r.status().message().find("heartbeat") != std::string::npos);

  // Still cut: a step with a 3 s deadline fails by it, naming the ps (its session's
  // connection to the ps dies of the same silence).
  t0 = Clock::now();
  auto r2 = s_short->run({y}, {{x, in}});
  took = Clock::now() - t0;
  REQUIRE_FALSE(r2.ok());
  INFO("the short step on the cut link: " << r2.status().to_string());
  CHECK(took < std::chrono::milliseconds(short_opts.step_timeout_ms + 1000));
  CHECK(names_ps(r2.status(), ps.address()));

  // And again: the session registers afresh, and its dial to the ps hangs (or the kernel
  // gives up on the neighbour: no route to host) until the deadline at most.
  t0 = Clock::now();
  auto r3 = s_short->run({y}, {{x, in}});
  took = Clock::now() - t0;
  REQUIRE_FALSE(r3.ok());
  INFO("registering on the cut link: " << r3.status().to_string());
  CHECK(took < std::chrono::milliseconds(short_opts.step_timeout_ms + 1000));
  CHECK(names_ps(r3.status(), ps.address()));

  // Both daemons noticed the silence too (heartbeats on their own connections).
  auto until = Clock::now() + std::chrono::milliseconds(kPeerTimeoutMs + 3000);
  auto both_noticed = [&] {
    return ps.log().find("no heartbeat") != std::string::npos &&
           worker.log().find("peer daemon /job:ps/task:0 at " + ps.address() + " lost") != std::string::npos;
  };
  while (!both_noticed() && Clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  CHECK_MESSAGE(ps.log().find("no heartbeat") != std::string::npos, logs());
  CHECK_MESSAGE(worker.log().find("peer daemon /job:ps/task:0 at " + ps.address() + " lost") != std::string::npos, logs());

  // Heal. Steps run again, no process restarted: each session registers afresh.
  link.set_inside(true);
  bool back = false;
  af::Status last;
  until = Clock::now() + std::chrono::seconds(30);
  for (int attempt = 0; attempt < 20 && !back && Clock::now() < until; ++attempt) {
    auto a = s_short->run({y}, {{x, in}});
    back = a.ok();
    if (!back) {
      last = a.status();
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  }
  REQUIRE_MESSAGE(back, "no step ran after the link healed: " << last.to_string() << "\n" << logs());
  for (int i = 0; i < 5; ++i) {
    auto a = s_short->run({y}, {{x, in}});
    REQUIRE_MESSAGE(a.ok(), a.status().to_string() << "\n" << logs());
    CHECK(a->at(0).to_vector<float>().at(0) == doctest::Approx(want0));
    auto b = s_long->run({y}, {{x, in}});
    REQUIRE_MESSAGE(b.ok(), b.status().to_string() << "\n" << logs());
  }
  CHECK_MESSAGE(worker.log().find("peer daemon /job:ps/task:0 at " + ps.address() + " is back") != std::string::npos,
                logs());
  CHECK(ps.running());
  CHECK(worker.running());
}
