// Hostile peers that hold the cluster token, against a real daemon (child process) and
// its parts: frames whose Cap'n Proto lists and pointers claim far more than the frame
// holds, a fuzzer that builds such frames from genuine ones, Edge frames for sessions the
// connection has no part in, names built to forge log lines, and a burst of connections
// past the daemon's descriptor limit.
#include <doctest/doctest.h>

#include <actorflow/actorflow.h>
#include <actorflow/graph_partition.h>
#include <actorflow/net/daemon.h>

#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <future>
#include <mutex>
#include <random>
#include <thread>

#include "../../net/src/partition_service.h"
#include "../../net/src/peer_table.h"
#include "interop/skip.h"
#include "net_raw_client.h"
#include "test_net_daemon_process.h"

namespace af = actorflow;
namespace an = actorflow::net;
using aftnet::authenticate;
using aftnet::Socket;
using Clock = std::chrono::steady_clock;

namespace {

const char* kToken = "hostile-test-token";

// Cap'n Proto pointers, by hand (encoding spec): a struct pointer, a list pointer, and the
// tag word in front of a list of structs (whose offset field holds the element count).
uint64_t struct_ptr(int32_t offset, uint16_t data_words, uint16_t ptrs) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(offset) << 2)) | (uint64_t{data_words} << 32) | (uint64_t{ptrs} << 48);
}
uint64_t list_ptr(int32_t offset, unsigned element_size, uint32_t count) {
  return 1 | (static_cast<uint64_t>(static_cast<uint32_t>(offset) << 2)) | (uint64_t{element_size & 7} << 32) |
         (uint64_t{count & 0x1fffffff} << 35);
}
constexpr unsigned kInlineComposite = 7;

// A frame whose body is one segment of `words`.
std::string frame_of(uint16_t type, const std::vector<uint64_t>& words) {
  std::string body(8 + words.size() * 8, '\0');
  uint32_t table[2] = {0, static_cast<uint32_t>(words.size())};
  std::memcpy(body.data(), table, 8);
  std::memcpy(body.data() + 8, words.data(), words.size() * 8);
  return an::encode_frame(type, body);
}

// A RunStep of handle 1 whose feeds list holds `n` structs of no size: 104 bytes on the
// wire however large `n` is (the frame of the report this guards against), plus
// `padding` words that nothing points to.
std::string zero_sized_feeds(uint32_t n, size_t padding = 0) {
  constexpr uint16_t kRunStep = 5;  // the Frame union's member, and the header's type - 1
  std::vector<uint64_t> words = {struct_ptr(0, 1, 1), kRunStep, struct_ptr(0, 3, 3), 1, 7, 0,
                                 list_ptr(2, kInlineComposite, 0), 0, 0, struct_ptr(static_cast<int32_t>(n), 0, 0)};
  words.resize(words.size() + padding, 0);
  return frame_of(kRunStep + 1, words);
}

// The next frame that is not a heartbeat; an error at EOF or timeout.
af::Result<an::Message> next_reply(Socket& s, an::FrameReader& reader) {
  for (int i = 0; i < 8; ++i) {
    auto m = s.read_message(reader);
    if (!m.ok() || !std::holds_alternative<an::HeartbeatMsg>(*m)) return m;
  }
  return af::internal_error("only heartbeats");
}

// The daemon's peak resident memory since the last reset, in kB (VmHWM), after resetting
// it when `reset`; 0 when /proc does not tell.
long peak_rss_kb(pid_t pid, bool reset) {
  if (reset) std::ofstream("/proc/" + std::to_string(pid) + "/clear_refs") << "5";
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string key;
  long kb = 0;
  while (in >> key)
    if (key == "VmHWM:" && in >> kb) return kb;
  return 0;
}

// How long a new client takes to authenticate; a daemon busy decoding on its io thread
// makes it wait.
std::chrono::milliseconds handshake_time(int port) {
  auto t0 = Clock::now();
  Socket s(port);
  bool ok = s.fd >= 0 && authenticate(s, kToken, "bystander");
  auto took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0);
  return ok ? took : std::chrono::milliseconds(1000000);
}

}  // namespace

TEST_CASE("a frame whose lists claim more than it holds is refused at once, costing at most about its size") {
  REQUIRE_MESSAGE(aftnet::daemon_built(), aftnet::daemon_binary() << " is not built (it is built with this test)");
  aftnet::DaemonProcess d(kToken);
  REQUIRE_MESSAGE(d.started(), d.log());
  {
    // The layout is right: three empty feeds decode, and the step fails for want of a graph.
    Socket s(d.port());
    REQUIRE(authenticate(s, kToken));
    REQUIRE(s.write_all(zero_sized_feeds(3)));
    an::FrameReader reader(1 << 20);
    auto reply = next_reply(s, reader);
    REQUIRE_MESSAGE(reply.ok(), reply.status().to_string() << "\n" << d.log());
    REQUIRE(std::holds_alternative<an::StepDoneMsg>(*reply));
    CHECK(std::get<an::StepDoneMsg>(*reply).step_id == 7);
  }
  peak_rss_kb(d.pid(), true);
  long base = d.rss_kb();
  // 104 bytes: the reader's traversal limit (a few words per word of the frame) refuses
  // 2^20 and 2^29 entries at once.
  for (uint32_t n : {uint32_t{1} << 20, uint32_t{0x1fffffff}}) {
    Socket s(d.port());
    REQUIRE(authenticate(s, kToken));
    std::string frame = zero_sized_feeds(n);
    CHECK(frame.size() == 104);
    REQUIRE(s.write_all(frame));
    CHECK(s.closed_by_peer());
    // Meanwhile the io thread answers others at once.
    CHECK(handshake_time(d.port()) < std::chrono::milliseconds(2000));
  }
  long peak = peak_rss_kb(d.pid(), false);
  INFO("RSS " << base << " kB before, peak " << peak << " kB");
  if (peak > 0) CHECK(peak - base < 4096);
  CHECK(d.log().find("traversal limit") != std::string::npos);
  // 2 MiB of padding lets the reader traverse 500,000 entries: the list check refuses
  // them (they would take some 200 MB decoded), and the frame costs about its own size.
  {
    Socket s(d.port());
    REQUIRE(authenticate(s, kToken));
    std::string frame = zero_sized_feeds(500000, size_t{2} << 17);
    long before = d.rss_kb();
    peak_rss_kb(d.pid(), true);
    REQUIRE(s.write_all(frame));
    CHECK(s.closed_by_peer());
    long padded_peak = peak_rss_kb(d.pid(), false);
    INFO("a " << frame.size() << "-byte frame: RSS " << before << " kB before, peak " << padded_peak << " kB");
    if (padded_peak > 0) CHECK(padded_peak - before < static_cast<long>(2 * frame.size() / 1024) + 4096);
  }
  CHECK(d.running());
  // The daemon writes its line as it closes the connection: it may come just after.
  const std::string claim = "RunStep's feeds list claims 500000 entries";
  auto said_by = Clock::now() + std::chrono::seconds(5);
  while (d.log().find(claim) == std::string::npos && Clock::now() < said_by)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK_MESSAGE(d.log().find(claim) != std::string::npos, d.log());
}

TEST_CASE("fuzz: 3,000 genuine frames with hostile list counts and pointers cost only their connection") {
  REQUIRE_MESSAGE(aftnet::daemon_built(), aftnet::daemon_binary() << " is not built (it is built with this test)");
  aftnet::DaemonProcess d(kToken, 0, {"--max_message_bytes", "4194304"});
  REQUIRE_MESSAGE(d.started(), d.log());
  aftnet::ScopedEnv env("ACTORFLOW_TOKEN", kToken);
  aftnet::Bystander bystander(d.target());
  REQUIRE(bystander.step({1}).ok());

  // Genuine frames of every kind a client may send, and of those it may not.
  auto tensor = [](std::vector<float> v) {
    af::TensorMessage m;
    m.producer = "x:0";
    m.tensor = af::Tensor::from_vector<float>(v, {static_cast<int64_t>(v.size())});
    return m;
  };
  an::RunStepMsg run{1, 2, {{"x:0", tensor({1, 2, 3})}, {"z:0", tensor({4})}}, {"y:0", "w:0"}, {"t"}, 100};
  af::Graph g;
  (void)(af::placeholder(g, af::f32, {-1}, "x") * 3.0);
  an::RegisterGraphMsg reg{3, g.serialize()};
  reg.location = "/job:worker/task:0/cpu:0";
  reg.session = 9;
  reg.peers = {{"/job:worker/task:0/cpu:0", "127.0.0.1:1"}, {"/job:ps/task:0/cpu:0", "127.0.0.1:2"}};
  reg.container = "c";
  an::StepDoneMsg done{4, af::Status::OK(), {tensor({1}), tensor({2, 3})}};
  an::EdgeFrameMsg edge{9, 1, 2, "/job:worker/task:0/cpu:0", tensor({5, 6})};
  // A RegisterGraph is fuzzed in this process only: one mutated into a partition's could
  // make the daemon dial whatever address its bytes spell.
  an::Message genuine[] = {run, done, edge, an::CreditMsg{9, 2, "/job:ps/task:0/cpu:0"},
                           an::CleanupStepMsg{1, 2, af::cancelled("x")}, an::CloseGraphMsg{1}};
  std::vector<std::string> seeds;
  for (auto& m : genuine) seeds.push_back(an::encode_message(m).bytes());
  const std::string reg_seed = an::encode_message(reg).bytes();

  std::mt19937_64 rng(2718);
  auto count = [&]() -> uint32_t {
    switch (rng() % 5) {
      case 0: return static_cast<uint32_t>(rng() % 4);
      case 1: return static_cast<uint32_t>(rng() % 1000);
      case 2: return uint32_t{1} << (rng() % 29);
      case 3: return 0x1fffffff;
      default: return static_cast<uint32_t>(rng());
    }
  };
  auto offset = [&]() -> int32_t {
    switch (rng() % 3) {
      case 0: return static_cast<int32_t>(rng() % 8) - 3;
      case 1: return static_cast<int32_t>(rng() % 64);
      default: return static_cast<int32_t>(rng()) >> 2;
    }
  };
  // A genuine frame, its body's words overwritten with pointers of hostile counts,
  // sizes and offsets (header and segment table stay consistent).
  auto mutate = [&](const std::string& seed) {
    std::string f = seed;
    size_t first = an::kFrameHeaderBytes + 8, words = (f.size() - first) / 8;
    int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits && words > 0; ++e) {
      uint64_t w = 0;
      switch (rng() % 6) {
        case 0: w = list_ptr(offset(), static_cast<unsigned>(rng() % 8), count()); break;
        case 1: w = struct_ptr(static_cast<int32_t>(count() & 0x3fffffff), static_cast<uint16_t>(rng()), static_cast<uint16_t>(rng())); break;
        case 2: w = list_ptr(offset(), kInlineComposite, static_cast<uint32_t>(rng() % 16)); break;
        case 3: w = struct_ptr(offset(), static_cast<uint16_t>(rng() % 4), static_cast<uint16_t>(rng() % 4)); break;
        case 4: w = 2 | (rng() & ~uint64_t{3}); break;  // a far pointer
        default: w = rng(); break;
      }
      std::memcpy(f.data() + first + 8 * (rng() % words), &w, 8);
    }
    // The frame's CRC covers the body: recompute it as a genuine sender would.
    uint16_t type = static_cast<uint16_t>(static_cast<unsigned char>(f[4]) | (static_cast<unsigned char>(f[5]) << 8));
    return an::encode_frame(type, std::string_view(f).substr(an::kFrameHeaderBytes));
  };

  // In this process: every mutated RegisterGraph decodes or is refused, and what it
  // decodes to is no larger than the frame allows.
  int reg_refused = 0;
  for (int i = 0; i < 2000; ++i) {
    std::string f = mutate(reg_seed);
    an::FrameReader fr(1 << 20);
    fr.allow_payloads(true);
    std::optional<an::RawFrame> raw;
    auto used = fr.consume(f.data(), f.size(), &raw);
    REQUIRE(used.ok());
    REQUIRE(raw);
    std::vector<an::PayloadTarget> payload;
    auto m = an::decode_message(*raw, 1 << 20, &payload);
    if (!m.ok()) {
      ++reg_refused;
      continue;
    }
    if (auto* r = std::get_if<an::RegisterGraphMsg>(&*m)) {
      size_t bytes = r->graph_def.size() + r->location.size() + r->container.size();
      for (auto& [loc, address] : r->peers) bytes += loc.size() + address.size();
      CHECK(r->peers.size() * 64 + bytes <= 2 * f.size() + (1 << 20));
    }
  }
  CHECK(reg_refused > 100);

  long base = d.rss_kb();
  peak_rss_kb(d.pid(), true);
  auto t0 = Clock::now();
  int frames = 0, connections = 0, refused = 0, answered = 0;
  std::optional<Socket> s;
  an::FrameReader reader(1 << 20);
  for (int i = 0; i < 3000 && Clock::now() - t0 < std::chrono::seconds(90); ++i) {
    if (!s) {
      s.emplace(d.port());
      REQUIRE(s->fd >= 0);
      REQUIRE(authenticate(*s, kToken));
      reader = an::FrameReader(1 << 20);
      ++connections;
    }
    std::string f = i % 50 == 0 ? zero_sized_feeds(count()) : mutate(seeds[rng() % seeds.size()]);
    ++frames;
    if (!s->write_all(f)) {
      s.reset();
      ++refused;
      continue;
    }
    // Frames that draw an answer (a RunStep, a RegisterGraph) are read; the rest are
    // followed by a step of our own, whose answer says the connection still stands.
    an::RunStepMsg probe{1, 1000000 + static_cast<uint64_t>(i), {}, {"x:0"}, {}, 100};
    if (!s->write_all(an::encode_message(probe).bytes())) {
      s.reset();
      ++refused;
      continue;
    }
    bool probe_back = false;
    for (int r = 0; r < 4 && !probe_back; ++r) {
      auto m = next_reply(*s, reader);
      if (!m.ok()) break;
      if (auto* sd = std::get_if<an::StepDoneMsg>(&*m); sd && sd->step_id == probe.step_id) probe_back = true;
    }
    if (probe_back) {
      ++answered;
    } else {
      s.reset();
      ++refused;
    }
    if (i % 500 == 499) {
      auto out = bystander.step({1, 2});
      REQUIRE_MESSAGE(out.ok(), out.to_string() << "\n" << d.log().substr(0, 4000));
      CHECK(handshake_time(d.port()) < std::chrono::milliseconds(2000));
    }
  }
  MESSAGE(frames << " frames over " << connections << " connections: " << refused << " cost their connection, "
                 << answered << " left it standing");
  CHECK(frames >= 1000);
  CHECK(refused > 100);
  CHECK(answered > 100);
  REQUIRE(d.running());
  auto last = bystander.step({5});
  CHECK_MESSAGE(last.ok(), last.to_string());
  long peak = peak_rss_kb(d.pid(), false);
  INFO("RSS " << base << " kB before, peak " << peak << " kB");
  if (peak > 0) CHECK(peak - base < 64 * 1024);
}

TEST_CASE("an Edge frame reaches a partition only from a connection that has a part in its session") {
  af::Graph g;
  af::Output x, y;
  {
    af::DeviceScope d(g, "/job:worker/task:1");
    x = af::placeholder(g, af::f32, {1}, "x");
  }
  {
    af::DeviceScope d(g, "/job:worker/task:0");
    y = x * 2.0;
  }
  auto parts = af::partition(g);
  REQUIRE_MESSAGE(parts.ok(), parts.status().to_string());
  REQUIRE(parts->edges.size() == 1);
  const std::string here = "/job:worker/task:0/cpu:0", there = "/job:worker/task:1/cpu:0";
  REQUIRE(parts->graphs.count(here) == 1);
  // This daemon's address sorts above its peer's, so registering dials nothing.
  an::PeerTable peers("127.0.0.1:9", kToken, [](const std::string&, an::Message&&) {});
  an::PartitionService service("the test's daemon", peers);
  an::RegisterGraphMsg m{1, parts->graphs.at(here)->serialize()};
  m.location = here;
  m.session = 42;
  m.peers = {{here, "127.0.0.1:9"}, {there, "127.0.0.1:1"}};
  m.edge_capacity = 2;
  const uint64_t owner = 7;
  auto handle = service.register_partition(m, owner, Clock::now() + std::chrono::seconds(5));
  REQUIRE_MESSAGE(handle.ok(), handle.status().to_string());

  an::RunStepMsg step{*handle, 1, {}, {y.name()}, {}, 3000};
  auto started = service.start_step(step, owner);
  auto edge = [&](float v) {
    af::TensorMessage t;
    t.step_id = 1;
    t.producer = "x:0";
    t.tensor = af::Tensor::from_vector<float>({v}, {1});
    return an::EdgeFrameMsg{42, 1, static_cast<uint64_t>(parts->edges[0].id), here, t};
  };
  // Another client's connection, a daemon the session never named, and a daemon named by
  // another session are all refused; the session's own peer is heard.
  auto stranger = service.deliver(edge(100), an::EdgeSource{99, ""});
  CHECK(stranger.code() == af::Code::failed_precondition);
  CHECK(stranger.message().find("neither registered nor was named a peer") != std::string::npos);
  CHECK_FALSE(service.deliver(edge(200), an::EdgeSource{0, "127.0.0.1:5"}).ok());
  CHECK_FALSE(service.deliver(an::CreditMsg{42, static_cast<uint64_t>(parts->edges[0].id), here}, an::EdgeSource{0, "127.0.0.1:5"}).ok());
  CHECK(service.deliver(edge(7), an::EdgeSource{0, "127.0.0.1:1"}).ok());
  auto done = service.finish_step(*started);
  REQUIRE_MESSAGE(done.status.ok(), done.status.to_string());
  REQUIRE(done.fetched.size() == 1);
  CHECK(done.fetched[0].tensor.data<float>()[0] == 14.0f);
}

TEST_CASE("names a peer sends reach the log escaped: no forged lines, no terminal escapes") {
  std::mutex mu;
  std::vector<std::string> lines;
  an::DaemonOptions o;
  o.token = kToken;
  o.log = [&](const std::string& line) {
    std::lock_guard<std::mutex> lock(mu);
    lines.push_back(line);
  };
  auto d = an::NodeDaemon::start(o);
  REQUIRE_MESSAGE(d.ok(), d.status().to_string());
  const std::string forged = "x\n2026-12-02 00:00:00 [actorflow-node /job:ps/task:0] shutdown requested\x1b[2J";
  {
    Socket s((*d)->port());
    REQUIRE(authenticate(s, kToken, forged));  // after authentication: the task name
  }
  {
    Socket s((*d)->port());
    CHECK_FALSE(authenticate(s, kToken, "t", forged.substr(0, 30)));  // before it: the role
  }
  auto deadline = Clock::now() + std::chrono::seconds(5);
  auto seen = [&] {
    std::lock_guard<std::mutex> lock(mu);
    int n = 0;
    for (auto& l : lines) n += l.find("2026-12-02 00:00:00") != std::string::npos;
    return n;
  };
  while (seen() < 2 && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK(seen() >= 2);
  std::lock_guard<std::mutex> lock(mu);
  for (auto& l : lines) {
    CHECK_MESSAGE(l.find('\n') == std::string::npos, l);
    CHECK_MESSAGE(l.find('\x1b') == std::string::npos, l);
  }
  bool escaped = false;
  for (auto& l : lines) escaped |= l.find("x\\x0a2026-12-02") != std::string::npos;
  CHECK(escaped);
}

TEST_CASE("needs prlimit: out of descriptors, the daemon backs off and logs once per interval instead of spinning") {
  if (!aftnet::daemon_built()) aft::skip("skipped: actorflow-node is not built");
  if (::access("/usr/bin/prlimit", X_OK) != 0) aft::skip("skipped: /usr/bin/prlimit is not here");
  auto env = aft::environment_without({"ACTORFLOW_TOKEN", "TF_CONFIG=", "SLURM_", "OMPI_"});
  env.push_back(std::string("ACTORFLOW_TOKEN=") + kToken);
  aft::ChildProcess d("af_net_fds",
                      {"/usr/bin/prlimit", "--nofile=64:64", aftnet::daemon_binary(), "--host", "127.0.0.1", "--port", "0"},
                      env, false, std::chrono::seconds(30));
  REQUIRE_MESSAGE(d.started(), d.log());
  auto cpu_ms = [&] {
    std::ifstream in("/proc/" + std::to_string(d.pid()) + "/stat");
    std::string stat((std::istreambuf_iterator<char>(in)), {});
    auto close = stat.rfind(')');
    std::istringstream rest(stat.substr(close + 2));
    std::string field;
    long ticks = 0;
    for (int i = 3; i <= 15 && rest >> field; ++i)
      if (i == 14 || i == 15) ticks += std::stol(field);
    return ticks * 1000 / ::sysconf(_SC_CLK_TCK);
  };
  long cpu0 = cpu_ms();
  std::vector<std::unique_ptr<Socket>> held;
  for (int i = 0; i < 150; ++i) held.push_back(std::make_unique<Socket>(d.port()));
  std::this_thread::sleep_for(std::chrono::seconds(3));
  long cpu = cpu_ms() - cpu0;
  std::string log = d.log();
  size_t failures = 0;
  for (size_t at = log.find("accept failed"); at != std::string::npos; at = log.find("accept failed", at + 1)) ++failures;
  INFO("the daemon used " << cpu << " ms of CPU and wrote " << failures << " 'accept failed' lines in 3 s");
  CHECK(failures >= 1);
  CHECK(failures <= 3);
  CHECK(cpu < 1000);
  // With the connections gone, it accepts again.
  held.clear();
  std::this_thread::sleep_for(std::chrono::seconds(1));
  Socket s(d.port());
  CHECK(authenticate(s, kToken));
  CHECK(d.running());
}
