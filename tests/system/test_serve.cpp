// actorflow-serve as its clients see it: the cancer sample trained and exported, the
// server started on a free port of 127.0.0.1, real HTTP requests. Its answers equal
// `--mode inference`; batching merges concurrent requests into fewer steps with the
// same answers; a new version is swapped in under load without one failed request, a
// broken one is skipped; the token, the metrics and SIGTERM's drain.
#include <doctest/doctest.h>

#include <sched.h>

#include <atomic>
#include <cmath>
#include <mutex>

#include "test_serve_util.h"
#include "thread_policy.h"

using namespace afserve;

namespace {

void check_close(const std::vector<double>& got, const std::vector<double>& want) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    // --mode inference prints 6 significant digits.
    INFO("row " << i << ": server " << got[i] << ", inference " << want[i]);
    CHECK(std::abs(got[i] - want[i]) <= 1e-5 * std::max(1.0, std::abs(want[i])));
  }
}

// Stops and joins client threads at the end of a scope, whether a REQUIRE left it or not.
struct JoinAll {
  std::vector<std::thread>& threads;
  std::atomic<bool>& stop;
  void now() {
    stop = true;
    for (auto& t : threads)
      if (t.joinable()) t.join();
  }
  ~JoinAll() { now(); }
};

}  // namespace

TEST_CASE("needs python3-sklearn: actorflow-serve answers as --mode inference does") {
  need_serving();
  TempDir work("answers");
  fs::path base = work.path / "model";
  train_and_export(work.path, base, 1, 1);
  auto want = inference_output(work.path, base, 1);
  auto rows = feature_rows();
  REQUIRE(want.size() == rows.size());

  fs::path token = work.path / "token";
  std::ofstream(token) << "s3cret\n";
  ServeProcess server({"--model_name", "cancer", "--model_base_path", base.string(), "--auth_token_file", token.string()});
  REQUIRE_MESSAGE(server.started(), server.log());
  std::vector<std::pair<std::string, std::string>> auth = {{"Authorization", "Bearer s3cret"}};

  SUBCASE("the REST API") {
    // The token: none or a wrong one gets 401.
    CHECK(http_call(server.port(), "GET", "/v1/models/cancer").status == 401);
    CHECK(http_call(server.port(), "GET", "/v1/models/cancer", "", {{"Authorization", "Bearer wrong"}}).status == 401);

    auto status = http_call(server.port(), "GET", "/v1/models/cancer", "", auth);
    REQUIRE_MESSAGE(status.status == 200, status.body);
    auto st = status.doc()["model_version_status"];
    REQUIRE(st.size() == 1);
    CHECK(st[0]["version"] == "1");
    CHECK(st[0]["state"] == "AVAILABLE");
    CHECK(st[0]["status"]["error_code"] == "OK");

    auto meta = http_call(server.port(), "GET", "/v1/models/cancer/metadata", "", auth);
    REQUIRE_MESSAGE(meta.status == 200, meta.body);
    auto sig = meta.doc()["metadata"]["signature_def"]["signature_def"]["serving_default"];
    CHECK(meta.doc()["model_spec"]["version"] == "1");
    CHECK(sig["inputs"]["x"]["dtype"] == "DT_FLOAT");
    CHECK(sig["inputs"]["x"]["tensor_shape"]["dim"][0]["size"] == "-1");
    CHECK(sig["inputs"]["x"]["tensor_shape"]["dim"][1]["size"] == "30");
    CHECK(sig["outputs"]["probability"]["dtype"] == "DT_FLOAT");

    // Every row at once, in the row form, then in the columnar form.
    auto all = http_call(server.port(), "POST", "/v1/models/cancer:predict", instances_body(rows, 0, rows.size()), auth);
    REQUIRE_MESSAGE(all.status == 200, all.body);
    check_close(predictions(all), want);
    json cols = json{{"inputs", {{"x", json(std::vector<std::vector<float>>(rows.begin(), rows.begin() + 5))}}}};
    auto columnar = http_call(server.port(), "POST", "/v1/models/cancer/versions/1:predict", cols.dump(), auth);
    REQUIRE_MESSAGE(columnar.status == 200, columnar.body);
    check_close(predictions(columnar, "outputs"), std::vector<double>(want.begin(), want.begin() + 5));
    // Named inputs in the row form.
    json named = json{{"instances", {{{"x", rows[7]}}}}};
    auto one = http_call(server.port(), "POST", "/v1/models/cancer:predict", named.dump(), auth);
    REQUIRE_MESSAGE(one.status == 200, one.body);
    check_close(predictions(one), {want[7]});

    // Unknown model or version: 404; a wrong shape: 400 naming the input and its shape.
    CHECK(http_call(server.port(), "POST", "/v1/models/other:predict", instances_body(rows, 0, 1), auth).status == 404);
    CHECK(http_call(server.port(), "POST", "/v1/models/cancer/versions/9:predict", instances_body(rows, 0, 1), auth).status == 404);
    auto bad = http_call(server.port(), "POST", "/v1/models/cancer:predict", R"({"instances": [[1, 2, 3]]})", auth);
    CHECK(bad.status == 400);
    CHECK(bad.body.find("'x'") != std::string::npos);
    CHECK(bad.body.find("[-1,30]") != std::string::npos);
    auto dtype = http_call(server.port(), "POST", "/v1/models/cancer:predict", R"({"instances": [["a"]]})", auth);
    CHECK(dtype.status == 400);
    CHECK(dtype.doc()["error"].is_string());

    // The metrics count what was answered, by code.
    auto metrics = http_call(server.port(), "GET", "/metrics", "", auth);
    REQUIRE(metrics.status == 200);
    CHECK(metric(metrics.body, "actorflow_serve_requests_total{code=\"200\"}") >= 5);
    CHECK(metric(metrics.body, "actorflow_serve_requests_total{code=\"401\"}") == 2);
    CHECK(metric(metrics.body, "actorflow_serve_requests_total{code=\"400\"}") == 2);
    CHECK(metric(metrics.body, "actorflow_serve_model_version{model=\"cancer\"}") == 1);
    CHECK(metric(metrics.body, "actorflow_serve_request_duration_seconds_count") >= 11);

    // One access-log line per request.
    CHECK(server.terminate(std::chrono::seconds(30)) == 0);
    std::string log = server.log();
    size_t lines = 0;
    for (size_t at = 0; (at = log.find("\"POST /v1/models/", at)) != std::string::npos; ++at) ++lines;
    CHECK(lines == 7);
  }
}

TEST_CASE("needs python3-sklearn: batching merges concurrent requests into fewer steps with the same answers") {
  need_serving();
  TempDir work("batching");
  fs::path base = work.path / "model";
  train_and_export(work.path, base, 1, 2);
  auto rows = feature_rows();
  ServeProcess plain({"--model_name", "cancer", "--model_base_path", base.string(), "--access_log=false"});
  ServeProcess batched({"--model_name", "cancer", "--model_base_path", base.string(), "--access_log=false", "--enable_batching",
                        "--max_batch_size", "64", "--batch_timeout_micros", "50000", "--num_batch_threads", "1"});
  REQUIRE_MESSAGE(plain.started(), plain.log());
  REQUIRE_MESSAGE(batched.started(), batched.log());
  // The batch worker yields to the HTTP threads on waking (SCHED_BATCH), as every thread of
  // the server does (its main thread's policy, set before it starts any). The servers
  // inherit this test's policy, so only from SCHED_OTHER can it show.
  if (sched_getscheduler(0) == SCHED_OTHER) {
    CHECK(aft::policies_of_threads_named(batched.pid(), "serve-batch") == std::vector<int>{SCHED_BATCH});
    CHECK(aft::policies_of_threads_named(plain.pid(), "serve-batch").empty());
    CHECK(aft::threads_under_policy(batched.pid(), SCHED_OTHER) == 0);
    CHECK(aft::threads_under_policy(plain.pid(), SCHED_OTHER) == 0);
  } else {
    MESSAGE("not checked: this test runs under a policy other than SCHED_OTHER, which its servers inherit");
  }

  constexpr int kThreads = 16, kEach = 4;
  std::vector<std::string> plain_answers(kThreads * kEach), batched_answers(kThreads * kEach);
  std::atomic<int> failures{0};
  std::vector<std::thread> clients;
  std::atomic<bool> unused_stop{false};
  JoinAll join_clients{clients, unused_stop};
  for (int t = 0; t < kThreads; ++t)
    clients.emplace_back([&, t] {
      for (int k = 0; k < kEach; ++k) {
        int i = t * kEach + k;
        auto r = http_call(batched.port(), "POST", "/v1/models/cancer:predict", instances_body(rows, i, i + 1));
        if (r.status != 200) ++failures;
        batched_answers[i] = r.body;
      }
    });
  join_clients.now();
  CHECK(failures == 0);
  // A merged step answers exactly as the unbatched server does for the same rows in one
  // request: merging and splitting lose nothing and mix no rows up.
  auto together = http_call(plain.port(), "POST", "/v1/models/cancer:predict", instances_body(rows, 0, kThreads * kEach));
  REQUIRE(together.status == 200);
  auto want = predictions(together);
  REQUIRE(want.size() == kThreads * kEach);
  for (int i = 0; i < kThreads * kEach; ++i) {
    auto got = predictions(Reply{200, batched_answers[i]});
    INFO("row " << i << ": batched " << batched_answers[i] << ", unbatched " << want[i]);
    REQUIRE(got.size() == 1);
    CHECK(got[0] == want[i]);
    // One row at a time takes another matmul path (the kernels pick one by shape), so
    // those answers agree to float rounding rather than to the bit.
    auto alone = http_call(plain.port(), "POST", "/v1/models/cancer:predict", instances_body(rows, i, i + 1));
    REQUIRE(alone.status == 200);
    CHECK(std::abs(predictions(alone).at(0) - got[0]) <= 1e-5 * std::max(1.0, std::abs(got[0])));
  }
  // Fewer steps than requests: concurrent requests were merged.
  auto m = http_call(batched.port(), "GET", "/metrics");
  double steps = metric(m.body, "actorflow_serve_session_steps_total");
  double requests = metric(m.body, "actorflow_serve_predict_requests_total");
  INFO(m.body);
  CHECK(requests == kThreads * kEach);
  CHECK(steps >= 1);
  CHECK(steps < requests / 2);
  auto mp = http_call(plain.port(), "GET", "/metrics");
  CHECK(metric(mp.body, "actorflow_serve_session_steps_total") == 1 + kThreads * kEach);
}

TEST_CASE("needs python3-sklearn: SIGTERM answers the requests in flight, then exits 0") {
  need_serving();
  TempDir work("drain");
  fs::path base = work.path / "model";
  train_and_export(work.path, base, 1, 3);
  auto rows = feature_rows();
  // A long batch timeout keeps the requests in flight while the signal arrives.
  ServeProcess server({"--model_name", "cancer", "--model_base_path", base.string(), "--enable_batching", "--max_batch_size", "1000",
                       "--batch_timeout_micros", "1500000"});
  REQUIRE_MESSAGE(server.started(), server.log());
  std::vector<Reply> replies(4);
  std::vector<std::thread> clients;
  std::atomic<bool> unused_stop{false};
  JoinAll join_clients{clients, unused_stop};
  for (int i = 0; i < 4; ++i)
    clients.emplace_back([&, i] { replies[i] = http_call(server.port(), "POST", "/v1/models/cancer:predict", instances_body(rows, i, i + 1)); });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  int rc = server.terminate(std::chrono::seconds(30));
  join_clients.now();
  CHECK(rc == 0);
  for (auto& r : replies) {
    CHECK_MESSAGE(r.status == 200, r.error << r.body);
    CHECK(predictions(r).size() == 1);
  }
  INFO(server.log());
  CHECK(server.log().find("drained") != std::string::npos);
}

TEST_CASE("needs python3-sklearn: a new version is swapped in under load without a failed request") {
  need_serving();
  TempDir work("versions");
  fs::path base = work.path / "model";
  train_and_export(work.path, base, 1, 4);
  auto rows = feature_rows();
  auto v1 = inference_output(work.path, base, 1);
  ServeProcess server({"--model_name", "cancer", "--model_base_path", base.string(), "--file_system_poll_wait_seconds", "0.2",
                       "--access_log=false"});
  REQUIRE_MESSAGE(server.started(), server.log());

  // Clients loop on predicting every row while version 2 is trained, exported and loaded;
  // each answer is classified by the version whose inference output it equals.
  auto close_to = [](const std::vector<double>& a, const std::vector<double>& b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
      if (std::abs(a[i] - b[i]) > 1e-5 * std::max(1.0, std::abs(b[i]))) return false;
    return true;
  };
  std::string body = instances_body(rows, 0, rows.size());
  std::atomic<bool> stop{false};
  std::mutex mu;
  std::vector<std::string> failures;
  std::vector<std::vector<std::vector<double>>> answers(3);  // per client, in order
  std::vector<std::thread> clients;
  JoinAll join_clients{clients, stop};
  for (int t = 0; t < 3; ++t)
    clients.emplace_back([&, t] {
      for (int k = 0; k < 100000 && !stop; ++k) {
        auto r = http_call(server.port(), "POST", "/v1/models/cancer:predict", body);
        std::lock_guard<std::mutex> lock(mu);
        if (r.status != 200) failures.push_back(std::to_string(r.status) + " " + r.error + r.body);
        else answers[t].push_back(predictions(r));
      }
    });
  train_and_export(work.path, base, 2, 5, 3);
  auto v2 = inference_output(work.path, base, 2);
  REQUIRE(!close_to(v1, v2));  // the versions answer differently
  bool swapped = false;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!swapped && std::chrono::steady_clock::now() < deadline) {
    auto st = http_call(server.port(), "GET", "/v1/models/cancer").doc();
    for (auto& v : st["model_version_status"])
      if (v["version"] == "1" && v["state"] == "END") swapped = true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  join_clients.now();
  CHECK(swapped);
  INFO(server.log());
  CHECK(failures.empty());
  if (!failures.empty()) MESSAGE("first failure: " << failures[0]);
  // Each client saw version 1's answers, then version 2's, and nothing else.
  int n1 = 0, n2 = 0;
  for (auto& seq : answers) {
    REQUIRE(!seq.empty());
    CHECK(close_to(seq.back(), v2));
    bool on_v2 = false;
    for (auto& a : seq) {
      bool is1 = close_to(a, v1), is2 = close_to(a, v2);
      CHECK((is1 || is2));
      if (is2) on_v2 = true, ++n2;
      if (is1) ++n1;
      CHECK(!(on_v2 && is1));
    }
  }
  MESSAGE(n1 << " answers from version 1, " << n2 << " from version 2");
  CHECK(n1 > 0);
  CHECK(n2 > 0);
  auto now = http_call(server.port(), "POST", "/v1/models/cancer/versions/2:predict", instances_body(rows, 0, rows.size()));
  REQUIRE(now.status == 200);
  check_close(predictions(now), v2);

  // A broken version 3 is logged and skipped; version 2 keeps answering.
  fs::create_directories(base / "3");
  std::ofstream(base / "3" / "model.afg") << "not a graph";
  std::ofstream(base / "3" / "signature.txt") << "input x\noutput probability:0\n";
  bool failed3 = false;
  deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!failed3 && std::chrono::steady_clock::now() < deadline) {
    auto st = http_call(server.port(), "GET", "/v1/models/cancer").doc();
    for (auto& v : st["model_version_status"])
      if (v["version"] == "3" && v["state"] == "END" && v["status"]["error_code"] != "OK") failed3 = true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  CHECK(failed3);
  auto still = http_call(server.port(), "POST", "/v1/models/cancer:predict", instances_body(rows, 0, 1));
  REQUIRE(still.status == 200);
  CHECK(std::abs(predictions(still).at(0) - v2[0]) <= 1e-5 * std::max(1.0, std::abs(v2[0])));
  auto m = http_call(server.port(), "GET", "/metrics");
  CHECK(metric(m.body, "actorflow_serve_model_version{model=\"cancer\"}") == 2);
  CHECK(server.log().find("version 3 failed to load, skipped") != std::string::npos);
}

TEST_CASE("needs python3-sklearn: 503 until a first version appears, then it is served") {
  need_serving();
  TempDir work("empty");
  fs::path base = work.path / "model";
  fs::create_directories(base);
  ServeProcess server({"--model_name", "cancer", "--model_base_path", base.string(), "--file_system_poll_wait_seconds", "0.2"});
  REQUIRE_MESSAGE(server.started(), server.log());
  auto rows = feature_rows();
  auto none = http_call(server.port(), "POST", "/v1/models/cancer:predict", instances_body(rows, 0, 1));
  CHECK(none.status == 503);
  CHECK(none.doc()["error"].is_string());
  CHECK(http_call(server.port(), "GET", "/v1/models/cancer/metadata").status == 503);
  auto status = http_call(server.port(), "GET", "/v1/models/cancer");
  CHECK(status.status == 200);
  CHECK(status.doc()["model_version_status"].empty());
  CHECK(metric(http_call(server.port(), "GET", "/metrics").body, "actorflow_serve_model_version{model=\"cancer\"}") == 0);

  train_and_export(work.path, base, 1, 8);
  auto want = inference_output(work.path, base, 1);
  Reply r;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    r = http_call(server.port(), "POST", "/v1/models/cancer:predict", instances_body(rows, 0, rows.size()));
    if (r.status != 503) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  REQUIRE_MESSAGE(r.status == 200, r.body);
  check_close(predictions(r), want);
}

TEST_CASE("needs python3-sklearn: plain row bodies (the fast reader) answer as the general reader does") {
  need_serving();
  TempDir work("bodies");
  fs::path base = work.path / "model";
  train_and_export(work.path, base, 1, 1);
  auto rows = feature_rows();
  ServeProcess server({"--model_name", "cancer", "--model_base_path", base.string(), "--access_log=false"});
  REQUIRE_MESSAGE(server.started(), server.log());
  auto call = [&](const std::string& body) { return http_call(server.port(), "POST", "/v1/models/cancer:predict", body); };

  // {"instances": [[...]]} takes the fast reader; named inputs take nlohmann's DOM. The
  // same rows must give the same bytes.
  auto plain = call(instances_body(rows, 0, 20));
  json named_rows = json::array();
  for (size_t i = 0; i < 20; ++i) named_rows.push_back({{"x", rows[i]}});
  auto named = call(json{{"instances", named_rows}}.dump());
  REQUIRE_MESSAGE(plain.status == 200, plain.body);
  REQUIRE_MESSAGE(named.status == 200, named.body);
  CHECK(plain.body == named.body);
  // Numbers written every way JSON allows read as the DOM reads them.
  std::string row = "[1, -2, 3.5, 4e1, -5E-1, 0, 0.0, -0.0, -0, 1e-7, 123456789012345678901234567890, 2.5e+2";
  for (int i = 12; i < 30; ++i) row += ", " + std::to_string(i);
  row += "]";
  auto fast = call("{\"instances\": [" + row + "]}");
  auto dom = call("{\"instances\": [{\"x\": " + row + "}]}");
  REQUIRE_MESSAGE(fast.status == 200, fast.body);
  CHECK(fast.body == dom.body);

  // What the fast reader gives up on still gets the general reader's answer.
  std::string one = instances_body(rows, 0, 1);
  CHECK(call(one + " x").status == 400);                 // trailing garbage
  CHECK(call(one + " }").status == 400);
  CHECK(call(one.substr(0, one.size() - 1)).status == 400);  // cut short
  CHECK(call(R"({"instances": []})").status == 400);
  CHECK(call(R"({"instances": [[1, 2]]})").status == 400);  // wrong shape
  CHECK(call(R"({"instances": [[[1]]]})").status == 400);   // too deep
  CHECK(call(R"({"instances": [[true]]})").status == 400);  // wrong dtype
  CHECK(call(R"({"instances": [1]})").status == 400);
  auto sig = call("{\"signature_name\": \"serving_default\", " + one.substr(1));
  CHECK(sig.status == 200);
  CHECK(sig.body == call(one).body);
  // A repeated key: the last one wins, as in nlohmann's DOM.
  std::string second = instances_body(rows, 1, 2);
  auto twice = call(one.substr(0, one.size() - 1) + ", " + second.substr(1));
  REQUIRE_MESSAGE(twice.status == 200, twice.body);
  CHECK(twice.body == call(second).body);
}
