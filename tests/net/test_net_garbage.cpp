// 1,000 hostile connections to a real daemon (child process): random bytes, truncated and
// oversized frames, lying lengths, valid headers over garbage bodies, wrong tokens, and
// garbage after a genuine handshake. Each may cost only its own connection: the daemon
// stays up and an authenticated client keeps running steps throughout.
#include <doctest/doctest.h>

#include <actorflow/actorflow.h>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <random>

#include "../../net/src/frame.h"
#include "../../net/src/frame_messages.h"
#include "../../net/src/handshake.h"
#include "net_raw_client.h"
#include "test_net_daemon_process.h"

namespace af = actorflow;
namespace an = actorflow::net;

using aftnet::Socket;
using aftnet::authenticate;

namespace {

const char* kToken = "garbage-test-token";

std::string random_bytes(std::mt19937_64& rng, size_t n) {
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(rng());
  return s;
}

}  // namespace

TEST_CASE("1,000 garbage, truncated and oversized frames: the daemon survives, other clients are unaffected") {
  REQUIRE_MESSAGE(aftnet::daemon_built(), aftnet::daemon_binary() << " is not built (it is built with this test)");
  aftnet::DaemonProcess d(kToken, 0, {"--max_message_bytes", "1048576"});
  REQUIRE_MESSAGE(d.started(), d.log());
  aftnet::ScopedEnv env("ACTORFLOW_TOKEN", kToken);
  aftnet::Bystander bystander(d.target());
  REQUIRE(bystander.step({1}).ok());

  std::mt19937_64 rng(777);
  std::string hello = an::encode_message(an::HelloMsg{an::kProtoVersion, "client", "x", 1, std::string(32, 'n')}).bytes();
  int closed_checked = 0, closed_seen = 0, authed = 0;
  for (int i = 0; i < 1000; ++i) {
    Socket s(d.port());
    REQUIRE(s.fd >= 0);
    int kind = static_cast<int>(rng() % 8);
    std::string bytes;
    bool expect_close = true;
    switch (kind) {
      case 0: bytes = random_bytes(rng, 1 + rng() % 300); break;
      case 1: bytes = hello.substr(0, rng() % hello.size()); expect_close = false; break;  // truncated; we hang up
      case 2: {  // oversized claim before authentication
        char hdr[an::kFrameHeaderBytes];
        an::write_frame_header({1, 0, static_cast<uint32_t>(an::kMaxPreAuthFrameBytes + 8 + rng() % (1u << 30)), 0}, hdr);
        bytes.assign(hdr, sizeof hdr);
        break;
      }
      case 3: bytes = an::encode_frame(1 + rng() % 9, random_bytes(rng, 8 * (1 + rng() % 40))); break;
      case 4: {  // a Hello with a broken CRC
        bytes = hello;
        bytes[an::kFrameHeaderBytes + rng() % (bytes.size() - an::kFrameHeaderBytes)] ^= 0x5a;
        break;
      }
      case 5: bytes = an::encode_message(an::RunStepMsg{1, 1, {}, {"x:0"}, {}, 0}).bytes(); break;  // no handshake at all
      case 6: {  // a wrong token
        CHECK_FALSE(authenticate(s, "not-the-token"));
        break;
      }
      default: {  // authenticated, then garbage: a lying length, a bad body, or an oversized frame
        REQUIRE(authenticate(s, kToken));
        ++authed;
        switch (rng() % 3) {
          case 0: bytes = random_bytes(rng, 1 + rng() % 200); break;
          case 1: bytes = an::encode_frame(6, random_bytes(rng, 8 * (1 + rng() % 64))); break;
          default: {
            char hdr[an::kFrameHeaderBytes];
            an::write_frame_header({6, 0, (1u << 20) + 8, 0}, hdr);
            bytes.assign(hdr, sizeof hdr);
          }
        }
      }
    }
    if (!bytes.empty()) s.write_all(bytes);
    // Now and then check that the daemon hung up on its own.
    if (expect_close && i % 10 == 0 && kind != 0) {
      ++closed_checked;
      if (s.closed_by_peer()) ++closed_seen;
    }
    if (i % 100 == 99) {
      auto out = bystander.step({1, 2});
      REQUIRE_MESSAGE(out.ok(), out.to_string());
    }
  }
  CHECK(authed > 50);
  CHECK(closed_checked > 0);
  CHECK(closed_seen == closed_checked);
  CHECK(d.running());
  auto last = bystander.step({5});
  CHECK_MESSAGE(last.ok(), last.to_string());
  std::string log = d.log();
  CHECK(log.find("closed before authentication") != std::string::npos);
  CHECK(log.find("over the limit") != std::string::npos);
}

TEST_CASE("a client that falls silent is dropped after --idle_timeout_ms and its graph freed; a busy one is not") {
  REQUIRE(aftnet::daemon_built());
  aftnet::DaemonProcess d(kToken, 0, {"--idle_timeout_ms", "2000"});
  REQUIRE_MESSAGE(d.started(), d.log());
  // A raw client: authenticates, registers a graph, then sends nothing, not even heartbeats.
  Socket s(d.port());
  REQUIRE(authenticate(s, kToken));
  af::Graph g;
  auto x = af::placeholder(g, af::f32, {-1}, "x");
  (void)(x * 2.0);
  an::RegisterGraphMsg reg{1, g.serialize()};
  reg.location = "/job:worker/task:0/cpu:0";
  reg.session = 1;
  reg.peers = {{reg.location, "127.0.0.1:" + std::to_string(d.port())}};
  REQUIRE(s.write_all(an::encode_message(reg).bytes()));
  an::FrameReader reader(1 << 20);
  af::Result<an::Message> reply = af::internal_error("none");
  for (int i = 0; i < 5; ++i) {  // heartbeats may come first
    reply = s.read_message(reader);
    if (!reply.ok() || std::holds_alternative<an::RegisteredMsg>(*reply)) break;
  }
  REQUIRE(reply.ok());
  REQUIRE(std::holds_alternative<an::RegisteredMsg>(*reply));
  CHECK(std::get<an::RegisteredMsg>(*reply).status.ok());
  auto t0 = std::chrono::steady_clock::now();
  bool closed = false;
  while (!closed && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(6)) {
    auto m = s.read_message(reader);  // heartbeats, until the daemon hangs up
    if (!m.ok() && m.status().message() == "eof") closed = true;
  }
  CHECK(closed);
  CHECK(std::chrono::steady_clock::now() - t0 >= std::chrono::milliseconds(1500));
  // The log line comes from the daemon's worker pool, just after the close.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (d.log().find("freed 1 graph(s)") == std::string::npos && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK(d.log().find("freed 1 graph(s)") != std::string::npos);
  CHECK(d.log().find("no heartbeat") != std::string::npos);

  // A session whose step outlasts the idle timeout stays connected: its heartbeats go on.
  aftnet::ScopedEnv env("ACTORFLOW_TOKEN", kToken);
  af::Graph slow;
  auto m = af::placeholder(slow, af::f32, {512, 512}, "m");
  af::Output y = m;
  for (int i = 0; i < 400; ++i) y = af::matmul(y, m) * (1.0 / 256);
  auto sess = af::Session::create(slow, d.target());
  REQUIRE(sess.ok());
  auto t1 = std::chrono::steady_clock::now();
  auto out = sess->run({y}, {{m, af::Tensor::filled(af::f32, {512, 512}, 0.5)}});
  auto took = std::chrono::steady_clock::now() - t1;
  REQUIRE_MESSAGE(out.ok(), out.status().to_string());
  INFO("the step took " << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms");
  auto again = sess->run({y}, {{m, af::Tensor::filled(af::f32, {512, 512}, 0.5)}});
  CHECK(again.ok());
}

TEST_CASE("a RegisterGraph without a location is refused, naming what is missing; the connection serves on") {
  REQUIRE(aftnet::daemon_built());
  aftnet::DaemonProcess d(kToken, 0, {});
  REQUIRE_MESSAGE(d.started(), d.log());
  Socket s(d.port());
  REQUIRE(authenticate(s, kToken));
  af::Graph g;
  (void)(af::placeholder(g, af::f32, {-1}, "x") * 2.0);
  an::FrameReader reader(1 << 20);
  auto registered = [&](const an::RegisterGraphMsg& m) -> af::Result<an::RegisteredMsg> {
    if (!s.write_all(an::encode_message(m).bytes())) return af::internal_error("write failed");
    for (int i = 0; i < 5; ++i) {  // heartbeats may come first
      auto reply = s.read_message(reader);
      if (!reply.ok()) return reply.status();
      if (auto* r = std::get_if<an::RegisteredMsg>(&*reply)) return *r;
    }
    return af::internal_error("no Registered reply");
  };
  // A whole graph, as clients before protocol 5 registered one.
  auto bare = registered(an::RegisterGraphMsg{1, g.serialize()});
  REQUIRE_MESSAGE(bare.ok(), bare.status().to_string());
  CHECK(bare->request_id == 1);
  CHECK(bare->handle == 0);
  CHECK(bare->status.code() == af::Code::invalid_argument);
  CHECK_MESSAGE(bare->status.message().find("location") != std::string::npos, bare->status.to_string());
  // The same graph as a partition, on the same connection: registered.
  an::RegisterGraphMsg part{2, g.serialize()};
  part.location = "/job:worker/task:0/cpu:0";
  part.session = 1;
  part.peers = {{part.location, "127.0.0.1:" + std::to_string(d.port())}};
  auto ok = registered(part);
  REQUIRE_MESSAGE(ok.ok(), ok.status().to_string());
  CHECK_MESSAGE(ok->status.ok(), ok->status.to_string());
  CHECK(ok->handle != 0);
}
