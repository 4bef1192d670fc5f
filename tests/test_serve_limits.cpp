// actorflow-serve against clients that try to take it down or fill it: JSON nested a
// million deep, a 15 MiB body. The server answers with TF Serving's {"error": "..."}
// (400), its memory stays within a bound that does not follow what the clients send,
// and it keeps serving.
#include <doctest/doctest.h>

#include "test_serve_util.h"

using namespace afserve;

namespace {

const std::string kPredict = "/v1/models/cancer:predict";

std::string nest(size_t depth, const std::string& inside = "") { return std::string(depth, '[') + inside + std::string(depth, ']'); }

// An answer that is TF Serving's error body, and short: no echo of what was sent.
void check_error_body(const Reply& r, int status) {
  INFO("status " << r.status << ": " << r.body.substr(0, 300) << r.error);
  CHECK(r.status == status);
  auto doc = r.doc();
  CHECK((doc.is_object() && doc.contains("error") && doc["error"].is_string()));
  CHECK(r.body.size() < 2048);
}

std::string columnar_body(const std::vector<std::vector<float>>& rows, size_t n) {
  json list = json::array();
  for (size_t i = 0; i < n; ++i) list.push_back(rows[i % rows.size()]);
  return json{{"inputs", {{"x", list}}}}.dump();
}

// Rows of one-digit values: two bytes of body per value, the most values (and, read
// into a DOM, the most nodes) a body of its size can hold.
std::vector<std::vector<int>> digit_rows(size_t n) {
  std::vector<std::vector<int>> out(n, std::vector<int>(30));
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < 30; ++j) out[i][j] = static_cast<int>((i * 7 + j) % 10);
  return out;
}

}  // namespace

TEST_CASE("needs python3-sklearn: JSON nested 100,000 and 1,000,000 deep gets 400 and the server lives on") {
  need_serving();
  TempDir work("deep");
  fs::path base = work.path / "model";
  train_and_export(work.path, base, 1, 11);
  auto rows = feature_rows();
  // No token and the default limits: the configuration the crash was found in.
  ServeProcess server({"--model_name", "cancer", "--model_base_path", base.string(), "--access_log=false"});
  REQUIRE_MESSAGE(server.started(), server.log());
  const int port = server.port();
  auto ref = http_call(port, "POST", kPredict, instances_body(rows, 0, 3));
  REQUIRE(ref.status == 200);

  for (size_t depth : {size_t{100000}, size_t{1000000}}) {
    std::string d = nest(depth), open(depth, '[');
    std::string row = json(rows[0]).dump();
    std::vector<std::string> bodies = {
        "{\"signature_name\": " + d + ", \"instances\": [[1]]}",
        "{\"signature_name\": " + nest(depth, "\"x\"") + ", \"instances\": [" + row + "]}",
        "{\"instances\": " + d + "}",
        "{\"instances\": [" + d + "]}",
        "{\"instances\": [{\"x\": " + d + "}]}",
        "{\"inputs\": " + d + "}",
        "{\"inputs\": {\"x\": " + d + "}}",
        "{\"unknown\": " + d + ", \"instances\": [" + row + "]}",
        "{\"instances\": [" + row + "], \"signature_name\": {\"a\": " + d + "}}",
        d,
        open,
        "{\"instances\": " + open,
    };
    for (size_t i = 0; i < bodies.size(); ++i) {
      INFO("depth " << depth << ", body " << i << ": " << bodies[i].substr(0, 60));
      check_error_body(http_call(port, "POST", kPredict, bodies[i]), 400);
      REQUIRE(server.running());
    }
  }
  // What the client sends is quoted, if at all, as a short prefix.
  std::string big(1 << 20, 'a');
  std::string ctl(1 << 20, '\x01');
  for (const std::string& body :
       {"{\"signature_name\": \"" + big + "\", \"instances\": [[1]]}", "{\"instances\": [{\"" + big + "\": 1}]}",
        "{\"instances\": [[\"" + ctl + "\"]]}", "{\"instances\": [[1, \"" + big, std::string(1 << 20, '7') + "x"}) {
    INFO(body.substr(0, 60));
    check_error_body(http_call(port, "POST", kPredict, body), 400);
  }
  // Still serving, with the same answers.
  auto after = http_call(port, "POST", kPredict, instances_body(rows, 0, 3));
  REQUIRE(after.status == 200);
  CHECK(after.body == ref.body);
  CHECK(server.running());
}

TEST_CASE("needs python3-sklearn: a 15 MiB JSON body costs at most a small multiple of its size") {
  need_serving();
  TempDir work("bigbody");
  fs::path base = work.path / "model";
  train_and_export(work.path, base, 1, 15);
  auto rows = feature_rows();
  ServeProcess server({"--model_name", "cancer", "--model_base_path", base.string(), "--access_log=false"});
  REQUIRE_MESSAGE(server.started(), server.log());
  const int port = server.port();
#ifdef __SANITIZE_ADDRESS__
  // ASan's shadow and its quarantine of freed blocks add to the server's RSS by design.
  constexpr double kMaxRatio = 12;
#else
  constexpr double kMaxRatio = 6;
#endif
  // The forms that the fast reader leaves to the general one: columnar, named rows.
  size_t row_bytes = json(digit_rows(1)[0]).dump().size() + 1;
  std::string columnar = json{{"inputs", {{"x", digit_rows((15u << 20) / row_bytes)}}}}.dump();
  json named = json::array();
  for (auto& row : digit_rows((15u << 20) / (row_bytes + 8))) named.push_back({{"x", row}});
  std::string named_rows = json{{"instances", named}}.dump();
  named = json();
  for (auto* body : {&columnar, &named_rows}) {
    REQUIRE(body->size() < (16u << 20));
    // Warm: the first step of a size allocates what later ones reuse.
    auto warm = http_call(port, "POST", kPredict, columnar_body(rows, 50));
    REQUIRE(warm.status == 200);
    long rss0 = server.rss_kb();
    REQUIRE(reset_peak_rss(server.pid()));
    auto r = http_call(port, "POST", kPredict, *body, {}, 120000);
    long peak = proc_status_kb(server.pid(), "VmHWM");
    REQUIRE_MESSAGE(r.status == 200, r.body.substr(0, 300) << r.error);
    CHECK(predictions(r, body == &columnar ? "outputs" : "predictions").size() ==
          (15u << 20) / (body == &columnar ? row_bytes : row_bytes + 8));
    double ratio = static_cast<double>(peak - rss0) * 1024 / static_cast<double>(body->size());
    MESSAGE(std::string(body == &columnar ? "columnar" : "named rows") << ": " << body->size() / 1024 << " kB body, server RSS " << rss0
                                                             << " kB, peak " << peak << " kB: " << ratio << "x the body");
    CHECK(ratio <= kMaxRatio);
  }
  CHECK(server.running());
}
