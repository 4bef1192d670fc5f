// TLS under the token handshake: daemons started with --tls_cert/--tls_key/
// --tls_ca and clients with ACTORFLOW_TLS_CERT/KEY/CA run steps, also across two daemons
// (their peer connection is TLS too); a client without TLS, or with a certificate from
// another CA, is refused; a daemon given half a TLS configuration refuses to start.
// The certificates are made here with Debian's openssl command.
#include <doctest/doctest.h>

#include <actorflow/actorflow.h>
#include <actorflow/net/daemon.h>

#include <signal.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "interop/skip.h"
#include "net_mid_step.h"
#include "test_net_daemon_process.h"

namespace af = actorflow;
namespace fs = std::filesystem;
using aftnet::DaemonProcess;
using aftnet::ScopedEnv;

namespace {

const char* kToken = "tls-test-token-0123";

bool run_quiet(const std::string& cmd) { return std::system((cmd + " >/dev/null 2>&1").c_str()) == 0; }

// A CA and certificates it signed, in a fresh folder.
struct Pki {
  fs::path dir;
  Pki() {
    dir = fs::temp_directory_path() / ("af_tls_" + std::to_string(::getpid()));
    fs::create_directories(dir);
  }
  ~Pki() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  std::string path(const std::string& name) const { return (dir / name).string(); }
  bool make_ca(const std::string& name) {
    return run_quiet("openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=" + name + " -keyout " +
                     path(name + ".key") + " -out " + path(name + ".pem"));
  }
  // Clients check that a daemon's certificate names the host they dialed: these daemons
  // listen on 127.0.0.1, so their certificates name it unless `alt_names` says otherwise.
  bool make_cert(const std::string& name, const std::string& ca, const std::string& alt_names = "IP:127.0.0.1") {
    std::ofstream(path(name + ".ext")) << "subjectAltName=" << alt_names << "\n";
    return run_quiet("openssl req -newkey rsa:2048 -nodes -subj /CN=" + name + " -keyout " + path(name + ".key") +
                     " -out " + path(name + ".csr")) &&
           run_quiet("openssl x509 -req -days 2 -in " + path(name + ".csr") + " -CA " + path(ca + ".pem") + " -CAkey " +
                     path(ca + ".key") + " -CAcreateserial -extfile " + path(name + ".ext") + " -out " + path(name + ".pem"));
  }
  std::vector<std::string> daemon_flags(const std::string& name, const std::string& ca) const {
    return {"--tls_cert", path(name + ".pem"), "--tls_key", path(name + ".key"), "--tls_ca", path(ca + ".pem")};
  }
};

af::Result<std::vector<af::Tensor>> one_step(const std::string& target, float x_value) {
  af::Graph g;
  af::Output x, y;
  {
    af::DeviceScope d(g, "/job:worker/task:0");
    x = af::placeholder(g, af::f32, {2}, "x");
  }
  {
    af::DeviceScope d(g, target.find(',') != std::string::npos ? "/job:worker/task:1" : "/job:worker/task:0");
    y = af::square(x) + 1.0;
  }
  af::SessionOptions opts;
  opts.target = target;
  opts.step_timeout_ms = 10000;
  AF_ASSIGN_OR_RETURN(af::Session sess, af::Session::create(g, opts));
  return sess.run({y}, {{x, af::Tensor::from_vector(std::vector<float>{x_value, 2}, {2})}});
}

}  // namespace

TEST_CASE("needs openssl: daemons and clients with TLS run steps, and plain or foreign clients are refused") {
  if (!aftnet::daemon_built()) aft::skip("TLS test skipped: actorflow-node is not built");
  Pki pki;
  if (!pki.make_ca("ca") || !pki.make_cert("node0", "ca") || !pki.make_cert("node1", "ca") ||
      !pki.make_cert("client", "ca") || !pki.make_ca("other") || !pki.make_cert("stranger", "other"))
    aft::skip("TLS test skipped: the openssl command cannot make certificates here");

  DaemonProcess d0{kToken, 0, pki.daemon_flags("node0", "ca")};
  DaemonProcess d1{kToken, 0, pki.daemon_flags("node1", "ca")};
  REQUIRE_MESSAGE(d0.started(), d0.log());
  REQUIRE_MESSAGE(d1.started(), d1.log());
  CHECK(d0.log().find("with TLS") != std::string::npos);
  ScopedEnv token("ACTORFLOW_TOKEN", kToken);

  {
    ScopedEnv cert("ACTORFLOW_TLS_CERT", pki.path("client.pem"));
    ScopedEnv key("ACTORFLOW_TLS_KEY", pki.path("client.key"));
    ScopedEnv ca("ACTORFLOW_TLS_CA", pki.path("ca.pem"));
    auto one = one_step(d0.target(), 3);
    REQUIRE_MESSAGE(one.ok(), one.status().to_string() << "\n" << d0.log());
    CHECK((*one)[0].data<float>()[0] == 10.0f);
    // Across two daemons: the edge rides their own TLS connection.
    auto two = one_step("/job:worker/task:0=" + d0.target() + ",/job:worker/task:1=" + d1.target(), 4);
    REQUIRE_MESSAGE(two.ok(), two.status().to_string() << "\n" << d0.log() << d1.log());
    CHECK((*two)[0].data<float>()[0] == 17.0f);
  }
  {
    // No TLS on the client: the daemon's TLS handshake fails and nothing runs.
    auto plain = one_step(d0.target(), 1);
    CHECK_FALSE(plain.ok());
  }
  {
    // A certificate the cluster's CA did not sign.
    ScopedEnv cert("ACTORFLOW_TLS_CERT", pki.path("stranger.pem"));
    ScopedEnv key("ACTORFLOW_TLS_KEY", pki.path("stranger.key"));
    ScopedEnv ca("ACTORFLOW_TLS_CA", pki.path("ca.pem"));
    auto foreign = one_step(d0.target(), 1);
    CHECK_FALSE(foreign.ok());
    CHECK(d0.log().find("TLS handshake") != std::string::npos);
  }
  {
    // A daemon whose certificate the cluster's CA signed, but for another host: a client
    // that dialed 127.0.0.1 refuses it (the CA alone would let any cluster member's key
    // stand in for any other's).
    REQUIRE(pki.make_cert("elsewhere", "ca", "DNS:elsewhere.example,IP:127.0.0.9"));
    DaemonProcess misnamed{kToken, 0, pki.daemon_flags("elsewhere", "ca")};
    REQUIRE_MESSAGE(misnamed.started(), misnamed.log());
    ScopedEnv cert("ACTORFLOW_TLS_CERT", pki.path("client.pem"));
    ScopedEnv key("ACTORFLOW_TLS_KEY", pki.path("client.key"));
    ScopedEnv ca("ACTORFLOW_TLS_CA", pki.path("ca.pem"));
    auto wrong_host = one_step(misnamed.target(), 1);
    REQUIRE_FALSE(wrong_host.ok());
    CHECK_MESSAGE(wrong_host.status().message().find("certificate verify failed") != std::string::npos,
                  wrong_host.status().to_string());
  }
  {
    // Half a configuration is an error naming the flags, not a silent plain daemon.
    DaemonProcess half{kToken, 0, {"--tls_cert", pki.path("node0.pem")}};
    CHECK_FALSE(half.started());
    CHECK(half.log().find("--tls_cert/--tls_key/--tls_ca") != std::string::npos);
  }
}

TEST_CASE("needs openssl: over TLS, a daemon killed or stopped mid-step fails the step, and the daemon left ends its part") {
  if (!aftnet::daemon_built()) aft::skip("TLS test skipped: actorflow-node is not built");
  Pki pki;
  if (!pki.make_ca("ca") || !pki.make_cert("node0", "ca") || !pki.make_cert("node1", "ca") ||
      !pki.make_cert("client", "ca"))
    aft::skip("TLS test skipped: the openssl command cannot make certificates here");
  ScopedEnv token("ACTORFLOW_TOKEN", kToken);
  ScopedEnv cert("ACTORFLOW_TLS_CERT", pki.path("client.pem"));
  ScopedEnv key("ACTORFLOW_TLS_KEY", pki.path("client.key"));
  ScopedEnv ca("ACTORFLOW_TLS_CA", pki.path("ca.pem"));
  // A short beat everywhere: a stopped peer is dropped after 1.5 s.
  actorflow::net::set_client_heartbeat(200, 1500);
  struct Restore {
    ~Restore() { actorflow::net::set_client_heartbeat(1000, 10000); }  // the documented defaults
  } restore;
  for (const char* how : {"kill -9", "SIGSTOP"}) {
    INFO(how);
    auto flags = [&](const std::string& node, std::vector<std::string> more) {
      auto f = pki.daemon_flags(node, "ca");
      f.insert(f.end(), {"--heartbeat_ms", "200", "--peer_timeout_ms", "1500"});
      f.insert(f.end(), more.begin(), more.end());
      return f;
    };
    aftnet::NearFar c(kToken, flags("node0", {"--worker_threads", "1"}), flags("node1", {}));
    REQUIRE_MESSAGE(c.started(), c.logs());
    auto& near = c.near;
    auto& far = c.far;
    af::SessionOptions opts;
    opts.step_timeout_ms = 120000;
    auto chain = aftnet::chain_step(c.target(), opts, std::chrono::seconds(1));
    REQUIRE_MESSAGE(chain.ok(), chain.status().to_string() << "\n" << c.logs());
    const bool stop = std::string(how) == "SIGSTOP";
    aftnet::lose_far_mid_step(
        near, far, [&] { stop ? (void)::kill(far.pid(), SIGSTOP) : far.kill9(); }, std::chrono::seconds(20), *chain);
    if (stop) ::kill(far.pid(), SIGCONT);
  }
}
