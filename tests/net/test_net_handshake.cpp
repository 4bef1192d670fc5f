// The daemon handshake: the right token is accepted; a wrong token, no token, a replayed
// or reflected handshake and a tampered Hello are refused. Then the same through a real
// daemon in this process: sessions with the right token run, others are refused with a
// message that says why; a daemon without a token refuses to start and says how to set one.
#include <doctest/doctest.h>

#include <actorflow/actorflow.h>
#include <actorflow/net/daemon.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <thread>

#include "../../net/src/handshake.h"
#include "../../net/src/token.h"

namespace af = actorflow;
namespace an = actorflow::net;

namespace {

// These cases test the wire: sessions on this process's daemon dial it, as another
// process's would, instead of calling it directly (and so pass its handshake).
// Set when the first case starts, not when the program loads: the other files of this
// test binary keep the direct path. Never unset: setenv while other threads read the
// environment is a race.
struct DialOwnDaemon {
  DialOwnDaemon() {
    static const bool set = setenv("AF_DIAL_OWN_DAEMON", "1", 1) == 0;
    (void)set;
  }
};

struct Pair {
  an::Handshake client;
  an::Handshake daemon;
  std::vector<an::Message> client_sent;  // everything the client put on the wire
  af::Status error;
};

Pair make_pair(const std::string& client_token, const std::string& daemon_token) {
  return Pair{an::Handshake(an::Handshake::Side::client, {"client", "trainer", 11}, client_token, *an::random_nonce()),
              an::Handshake(an::Handshake::Side::daemon, {"daemon", "/job:worker/task:0", 22}, daemon_token,
                            *an::random_nonce(), 1 << 20),
              {},
              af::Status::OK()};
}

// Delivers messages both ways until nothing is left or one side refuses.
void run(Pair& p) {
  std::vector<an::Message> to_daemon{p.client.hello()}, to_client{p.daemon.hello()};
  p.client_sent = to_daemon;
  for (int round = 0; round < 8 && (!to_daemon.empty() || !to_client.empty()); ++round) {
    std::vector<an::Message> next_to_daemon, next_to_client;
    for (auto& m : to_daemon) {
      auto r = p.daemon.on_message(m);
      if (!r.ok()) return void(p.error = r.status());
      for (auto& x : *r) next_to_client.push_back(x);
    }
    for (auto& m : to_client) {
      auto r = p.client.on_message(m);
      if (!r.ok()) return void(p.error = r.status());
      for (auto& x : *r) {
        next_to_daemon.push_back(x);
        p.client_sent.push_back(x);
      }
    }
    to_daemon.swap(next_to_daemon);
    to_client.swap(next_to_client);
  }
}

struct EnvVar {
  EnvVar(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) setenv(name, value, 1);
    else unsetenv(name);
  }
  ~EnvVar() {
    if (old_) setenv(name_, old_->c_str(), 1);
    else unsetenv(name_);
  }
  const char* name_;
  std::optional<std::string> old_;
};

}  // namespace

TEST_CASE_FIXTURE(DialOwnDaemon, "handshake: the right token authenticates both sides") {
  auto p = make_pair("s3cret", "s3cret");
  run(p);
  REQUIRE(p.error.ok());
  CHECK(p.client.done());
  CHECK(p.daemon.done());
  CHECK(p.client.peer().task == "/job:worker/task:0");
  CHECK(p.client.peer().incarnation == 22);
  CHECK(p.daemon.peer().task == "trainer");
  CHECK(p.client.peer_max_message_bytes() == (1u << 20));
}

TEST_CASE_FIXTURE(DialOwnDaemon, "handshake: a wrong token or no token is refused") {
  for (auto [client_token, daemon_token] : {std::pair{"wrong", "s3cret"}, std::pair{"", "s3cret"}, std::pair{"s3cret", ""}}) {
    auto p = make_pair(client_token, daemon_token);
    run(p);
    CHECK_FALSE(p.error.ok());
    CHECK(p.error.message().find("cluster token") != std::string::npos);
    CHECK_FALSE(p.daemon.done());
    CHECK_FALSE(p.client.done());
  }
}

TEST_CASE_FIXTURE(DialOwnDaemon, "handshake: a recorded client handshake replayed to a daemon is refused") {
  auto recorded = make_pair("s3cret", "s3cret");
  run(recorded);
  REQUIRE(recorded.error.ok());
  REQUIRE(recorded.client_sent.size() == 2);  // Hello, AuthProof
  // The attacker replays both frames to a fresh daemon, which picks a fresh nonce.
  an::Handshake fresh(an::Handshake::Side::daemon, {"daemon", "/job:worker/task:0", 22}, "s3cret", *an::random_nonce());
  REQUIRE(fresh.on_message(recorded.client_sent[0]).ok());
  auto r = fresh.on_message(recorded.client_sent[1]);
  CHECK_FALSE(r.ok());
  CHECK_FALSE(fresh.done());
  // Two handshakes never share nonces.
  CHECK(std::get<an::HelloMsg>(recorded.client_sent[0]).nonce != fresh.hello().nonce);
}

TEST_CASE_FIXTURE(DialOwnDaemon, "handshake: reflected proofs, tampered Hellos, early frames are refused") {
  // The two proofs of one handshake differ (each names its prover), so neither side's
  // proof can be sent back as the other's.
  auto p = make_pair("s3cret", "s3cret");
  REQUIRE(p.daemon.on_message(p.client.hello()).ok());
  auto proof = p.client.on_message(p.daemon.hello());
  REQUIRE(proof.ok());
  auto reply = p.daemon.on_message((*proof)[0]);
  REQUIRE(reply.ok());
  REQUIRE(reply->size() == 2);
  CHECK(std::get<an::AuthProofMsg>((*proof)[0]).mac != std::get<an::AuthProofMsg>((*reply)[0]).mac);
  auto r = make_pair("s3cret", "s3cret");
  REQUIRE(r.daemon.on_message(r.client.hello()).ok());
  auto daemon_proof_as_client = an::AuthProofMsg{std::get<an::AuthProofMsg>((*reply)[0]).mac};
  CHECK_FALSE(r.daemon.on_message(daemon_proof_as_client).ok());
  // A Hello whose task was changed in flight: the client's MAC covers the real one.
  auto q = make_pair("s3cret", "s3cret");
  auto hello = q.client.hello();
  hello.task = "/job:ps/task:0";
  REQUIRE(q.daemon.on_message(hello).ok());
  auto honest = q.client.on_message(q.daemon.hello());
  REQUIRE(honest.ok());
  CHECK_FALSE(q.daemon.on_message((*honest)[0]).ok());
  // Frames other than the handshake's before authentication.
  auto e = make_pair("s3cret", "s3cret");
  CHECK_FALSE(e.daemon.on_message(an::RunStepMsg{}).ok());
  CHECK_FALSE(e.client.on_message(an::WelcomeMsg{1}).ok());
  // Nonces of the wrong size, wrong roles.
  auto f = make_pair("s3cret", "s3cret");
  auto bad = f.client.hello();
  bad.nonce = "short";
  CHECK_FALSE(f.daemon.on_message(bad).ok());
  auto g = make_pair("s3cret", "s3cret");
  CHECK_FALSE(g.client.on_message(g.client.hello()).ok());  // role "client" talking to a client
  // A daemon is dialed by clients and by peer daemons, nothing else; the refusal shows the
  // role escaped.
  auto h = make_pair("s3cret", "s3cret");
  auto odd = h.client.hello();
  odd.role = "admin\n\x1b[2J";
  auto refused = h.daemon.on_message(odd);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().message().find("admin\\x0a\\x1b[2J") != std::string::npos);
  auto peer = make_pair("s3cret", "s3cret");
  auto as_daemon = peer.client.hello();
  as_daemon.role = "daemon";
  CHECK(peer.daemon.on_message(as_daemon).ok());
  // The role is inside the MACs: a client's Hello changed to role "daemon" in flight
  // fails the client's proof.
  auto k = make_pair("s3cret", "s3cret");
  auto altered = k.client.hello();
  altered.role = "daemon";
  REQUIRE(k.daemon.on_message(altered).ok());
  auto altered_proof = k.client.on_message(k.daemon.hello());
  REQUIRE(altered_proof.ok());
  REQUIRE(altered_proof->size() == 1);
  CHECK_FALSE(k.daemon.on_message((*altered_proof)[0]).ok());
}

TEST_CASE_FIXTURE(DialOwnDaemon, "token: flag file, ACTORFLOW_TOKEN, ACTORFLOW_TOKEN_FILE; none says how to set one") {
  std::string path = "/tmp/af_test_token_" + std::to_string(::getpid());
  std::ofstream(path) << "from-file-0123456789\n";
  CHECK(*an::load_token(path, {}) == "from-file-0123456789");
  CHECK(*an::load_token("", {{"ACTORFLOW_TOKEN", "from-env-0123456789"}}) == "from-env-0123456789");
  CHECK(*an::load_token("", {{"ACTORFLOW_TOKEN_FILE", path}}) == "from-file-0123456789");
  auto none = an::load_token("", {});
  REQUIRE_FALSE(none.ok());
  CHECK(none.status().message().find("ACTORFLOW_TOKEN=") != std::string::npos);
  CHECK(none.status().message().find("--insecure") != std::string::npos);
  CHECK_FALSE(an::load_token("/nonexistent/token", {}).ok());
  std::remove(path.c_str());
}

TEST_CASE_FIXTURE(DialOwnDaemon, "token: one shorter than 16 bytes is refused, with the command that makes a good one") {
  for (auto short_token : {"s3cret", "fifteen-bytes-x"}) {
    auto env = an::load_token("", {{"ACTORFLOW_TOKEN", short_token}});
    REQUIRE_FALSE(env.ok());
    CHECK(env.status().message().find("ACTORFLOW_TOKEN") != std::string::npos);
    CHECK(env.status().message().find("head -c 32 /dev/urandom | base64") != std::string::npos);
  }
  CHECK(an::load_token("", {{"ACTORFLOW_TOKEN", "sixteen-bytes-xx"}}).ok());
  std::string path = "/tmp/af_test_short_token_" + std::to_string(::getpid());
  std::ofstream(path) << "short\n";
  auto file = an::load_token(path, {});
  REQUIRE_FALSE(file.ok());
  CHECK(file.status().message().find(path) != std::string::npos);
  std::remove(path.c_str());
  an::DaemonOptions o;
  o.token = "s3cret";
  o.log = [](const std::string&) {};
  auto d = an::NodeDaemon::start(o);
  REQUIRE_FALSE(d.ok());
  CHECK(d.status().message().find("at least 16") != std::string::npos);
}

TEST_CASE_FIXTURE(DialOwnDaemon, "daemon: without TLS it listens beyond loopback only when told the network is trusted") {
  an::DaemonOptions o;
  o.token = "a-token-of-enough-bytes";
  o.log = [](const std::string&) {};
  o.host = "0.0.0.0";
  auto wide = an::NodeDaemon::start(o);
  REQUIRE_FALSE(wide.ok());
  CHECK(wide.status().message().find("--trusted_network") != std::string::npos);
  CHECK(wide.status().message().find("--tls_cert") != std::string::npos);
  // Every loopback address is fine, and no host at all means 127.0.0.1 without TLS.
  o.host = "127.0.0.2";
  auto loop = an::NodeDaemon::start(o);
  REQUIRE_MESSAGE(loop.ok(), loop.status().to_string());
  o.host = "";
  auto dflt = an::NodeDaemon::start(o);
  REQUIRE_MESSAGE(dflt.ok(), dflt.status().to_string());
  CHECK((*dflt)->address().rfind("127.0.0.1:", 0) == 0);
  // (With --trusted_network it would bind every interface: not done in a test.)
}

TEST_CASE_FIXTURE(DialOwnDaemon, "daemon: no token refuses to start; --insecure only on loopback") {
  EnvVar t("ACTORFLOW_TOKEN", nullptr), tf("ACTORFLOW_TOKEN_FILE", nullptr);
  auto d = an::NodeDaemon::start({});
  REQUIRE_FALSE(d.ok());
  CHECK(d.status().message().find("ACTORFLOW_TOKEN") != std::string::npos);
  an::DaemonOptions wide;
  wide.host = "0.0.0.0";
  wide.insecure = true;
  CHECK_FALSE(an::NodeDaemon::start(wide).ok());
  an::DaemonOptions loop;
  loop.insecure = true;
  loop.log = [](const std::string&) {};
  auto ok = an::NodeDaemon::start(loop);
  REQUIRE(ok.ok());
  CHECK((*ok)->port() != 0);
}

TEST_CASE_FIXTURE(DialOwnDaemon, "daemon in process: right token runs, wrong token is refused, graphs freed on close") {
  std::vector<std::string> lines;
  std::mutex mu;
  an::DaemonOptions o;
  o.token = "right-token-0123456";
  o.task = "/job:worker/task:7";
  o.log = [&](const std::string& l) {
    std::lock_guard<std::mutex> lock(mu);
    lines.push_back(l);
  };
  auto d = an::NodeDaemon::start(o);
  REQUIRE(d.ok());
  std::string target = "af://127.0.0.1:" + std::to_string((*d)->port());
  af::Graph g;
  auto x = af::placeholder(g, af::f32, {-1}, "x");
  auto y = x * 2.0 + 1.0;
  {
    EnvVar t("ACTORFLOW_TOKEN", "wrong-token-0123456");
    auto s = af::Session::create(g, target);
    REQUIRE_FALSE(s.ok());
    CHECK(s.status().message().find("127.0.0.1:" + std::to_string((*d)->port())) != std::string::npos);
    CHECK(s.status().message().find("ACTORFLOW_TOKEN") != std::string::npos);
  }
  {
    EnvVar t("ACTORFLOW_TOKEN", "right-token-0123456");
    auto s = af::Session::create(g, target);
    REQUIRE(s.ok());
    auto out = s->run({y}, {{x, af::Tensor::from_vector<float>({1, 2, 3})}});
    REQUIRE(out.ok());
    CHECK((*out)[0].equals(af::Tensor::from_vector<float>({3, 5, 7})));
    CHECK((*d)->num_graphs() == 1);
  }
  // The session closed its connection: the daemon frees the graph.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while ((*d)->num_graphs() != 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  CHECK((*d)->num_graphs() == 0);
  (*d)->stop();
  std::lock_guard<std::mutex> lock(mu);
  bool refused = false, shutdown = false;
  for (auto& l : lines) {
    if (l.find("closed before authentication") != std::string::npos) refused = true;
    if (l.find("shutdown") != std::string::npos) shutdown = true;
  }
  CHECK(refused);
  CHECK(shutdown);
}

TEST_CASE_FIXTURE(DialOwnDaemon, "a listener that never answers the handshake fails create() by the handshake timeout, saying so") {
  // A socket that accepts (the kernel's backlog does) and never speaks: not a daemon.
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd >= 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  REQUIRE(::listen(fd, 4) == 0);
  socklen_t len = sizeof a;
  REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0);
  const std::string target = "af://127.0.0.1:" + std::to_string(ntohs(a.sin_port));
  EnvVar t("ACTORFLOW_TOKEN", "some-token-0123456");
  af::Graph g;
  auto x = af::placeholder(g, af::f32, {1}, "x");
  (void)(x * 2.0);
  auto t0 = std::chrono::steady_clock::now();
  auto s = af::Session::create(g, target);
  auto took = std::chrono::steady_clock::now() - t0;
  ::close(fd);
  REQUIRE_FALSE(s.ok());
  INFO(s.status().to_string());
  CHECK(s.status().message().find(target.substr(5)) != std::string::npos);
  CHECK(s.status().message().find("answered the handshake") != std::string::npos);
  // Not the wrong-token hint: nothing refused anything.
  CHECK(s.status().message().find("ACTORFLOW_TOKEN") == std::string::npos);
  CHECK(took < std::chrono::seconds(30));
}
