// A daemon that loses a peer daemon ends the steps of the partitions that exchange edges
// with it, though no client told it to: the client of a step may not know (the lost
// peer's own part had answered it already, with an edge still unwritten). Two daemons
// (child processes on 127.0.0.1, port 0); a raw client registers the two partitions of a
// cut graph, runs only the near one's step, whose _Recv then waits for the far daemon,
// and the far daemon is killed: the near step fails at once, naming the lost peer.
#include <doctest/doctest.h>

#include <actorflow/actorflow.h>
#include <actorflow/graph_partition.h>

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "../../net/src/connection_client.h"
#include "test_net_daemon_process.h"

namespace af = actorflow;
namespace afn = actorflow::net;
using aftnet::DaemonProcess;

namespace {

const char* kToken = "peer-loss-test-token";
const std::string kNear = "/job:worker/task:0/cpu:0", kFar = "/job:worker/task:1/cpu:0";

struct Registered {
  std::unique_ptr<afn::DaemonClient> client;
  uint64_t handle = 0;
};

}  // namespace

TEST_CASE("a daemon that loses a peer ends the steps waiting for its edges at once, naming it") {
  DaemonProcess d0(kToken, 0, {"--job_name", "worker", "--task_index", "0"});
  DaemonProcess d1(kToken, 0, {"--job_name", "worker", "--task_index", "1"});
  REQUIRE(d0.started());
  REQUIRE(d1.started());
  // The lower address dials (peer_table.h): both ways a connection can be lost are run.
  bool near_dials = true;
  SUBCASE("the near daemon dialed the lost one") { near_dials = true; }
  SUBCASE("the lost daemon had dialed the near one") { near_dials = false; }
  const bool d0_lower = d0.address() < d1.address();
  DaemonProcess& near = d0_lower == near_dials ? d0 : d1;
  DaemonProcess& far = &near == &d0 ? d1 : d0;
  CAPTURE(near_dials);

  // far: x; near: y = -x, fetched.
  af::Graph g;
  af::Output x, y;
  {
    af::DeviceScope on(g, kFar);
    x = af::constant(g, af::Tensor::scalar(2.0f), "x");
  }
  {
    af::DeviceScope on(g, kNear);
    y = af::neg(x, "y");
  }
  af::PartitionOptions popts;
  popts.default_location = kNear;
  auto parts = af::partition(g, popts);
  REQUIRE(parts.ok());
  REQUIRE(parts->graphs.size() == 2);

  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  std::vector<std::pair<std::string, std::string>> peers = {{kNear, near.address()}, {kFar, far.address()}};
  std::map<std::string, Registered> reg;
  for (auto& [loc, pg] : parts->graphs) {
    DaemonProcess& d = loc == kNear ? near : far;
    auto c = afn::DaemonClient::connect("127.0.0.1", static_cast<uint16_t>(d.port()), kToken, d.target(), deadline);
    REQUIRE_MESSAGE(c.ok(), c.status().to_string());
    afn::RegisterGraphMsg m;
    m.graph_def = pg->serialize();
    m.location = loc;
    m.session = 4242;
    m.peers = peers;
    auto h = (*c)->register_message(std::move(m), deadline);
    REQUIRE_MESSAGE(h.ok(), h.status().to_string(), "\n", near.log(), far.log());
    reg[loc] = Registered{std::move(c).value(), *h};
  }

  // Only the near part runs: its _Recv waits for the far daemon, with a deadline far off.
  afn::RunStepMsg step;
  step.handle = reg[kNear].handle;
  step.step_id = 1;
  step.fetches = {"y:0"};
  step.timeout_ms = 60000;
  afn::DaemonClient& client = *reg[kNear].client;
  REQUIRE(client.start_step(step, afn::DaemonClient::kNoDeadline).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(300));

  auto t0 = std::chrono::steady_clock::now();
  far.kill9();
  auto done = client.wait_step(1, t0 + std::chrono::seconds(20));
  auto took = std::chrono::steady_clock::now() - t0;
  REQUIRE_MESSAGE(done.ok(), done.status().to_string(), "\n", near.log());
  INFO(done->status.to_string(), "\n--- near:\n", near.log());
  CHECK(done->status.code() == af::Code::unavailable);
  CHECK(done->status.message().find(far.address()) != std::string::npos);
  CHECK(done->status.message().find("peer daemon") != std::string::npos);
  CHECK(took < std::chrono::seconds(5));  // not the step's deadline (60 s)

  // The partition is bound to the lost peer: its next step fails at once, the same way
  // (the client registers it afresh).
  step.step_id = 2;
  auto again = client.run_step(step, std::chrono::steady_clock::now() + std::chrono::seconds(20));
  REQUIRE_MESSAGE(again.ok(), again.status().to_string());
  CHECK(again->status.code() == af::Code::unavailable);
  CHECK(again->status.message().find(far.address()) != std::string::npos);
}
