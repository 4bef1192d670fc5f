// actorflow-serve --model_config_file: TF Serving's ModelServerConfig in text format, two
// models with their version policies and labels, served at once by one process (started
// on a free port of 127.0.0.1 and asked over REST, as a client would); a new version
// under `latest 2` pushes the oldest out; a broken config file stops the server at start
// with an error that names the problem.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>

#include "test_serve_util.h"

using namespace afserve;

namespace {

// The predictions for rows [0, n) from `target`, or empty when the answer was not 200.
std::vector<double> predict(int port, const std::string& target, const std::vector<std::vector<float>>& rows, size_t n = 16) {
  auto r = http_call(port, "POST", target, instances_body(rows, 0, n));
  INFO(target << ": " << r.status << " " << r.body << r.error);
  CHECK(r.status == 200);
  return predictions(r);
}

// The versions the status call lists with this state.
std::vector<int64_t> versions_in(int port, const std::string& model, const std::string& state) {
  auto r = http_call(port, "GET", "/v1/models/" + model);
  std::vector<int64_t> out;
  auto doc = r.doc();
  if (r.status != 200 || !doc.contains("model_version_status")) return out;
  for (auto& v : doc["model_version_status"])
    if (v["state"] == state) out.push_back(std::stoll(v["version"].get<std::string>()));
  std::sort(out.begin(), out.end());
  return out;
}

// Runs the server with `args` to its exit (it must exit within 60 s); its output.
std::string run_to_exit(const std::vector<std::string>& args, int* rc) {
  std::string cmd = "timeout -s KILL 60 " + serve_binary() + " --host 127.0.0.1 --rest_api_port 0 --port 0";
  for (auto& a : args) cmd += " '" + a + "'";
  cmd += " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  REQUIRE(p);
  std::string out;
  char buf[4096];
  while (fgets(buf, sizeof buf, p)) out += buf;
  int status = pclose(p);
  *rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

}  // namespace

TEST_CASE("needs python3-sklearn: --model_config_file serves two models with their version policies and labels") {
  need_serving();
  TempDir work("config");
  // Two trainings (seeds 1 and 2); the other versions are copies, so that which version
  // answered shows in the predictions.
  fs::path a = work.path / "a", b = work.path / "b";
  train_and_export(work.path, a, 1, 1);
  train_and_export(work.path, a, 2, 2);
  fs::copy(a / "1", a / "3", fs::copy_options::recursive);  // cancer: 1 = seed 1, 2 = seed 2, 3 = seed 1
  fs::create_directories(b);
  fs::copy(a / "2", b / "1", fs::copy_options::recursive);  // second: 1 = seed 2, 2 = seed 1, 3 = seed 2
  fs::copy(a / "1", b / "2", fs::copy_options::recursive);
  fs::copy(a / "2", b / "3", fs::copy_options::recursive);
  fs::path config = work.path / "models.config";
  std::ofstream(config) << "# two models\n"
                           "model_config_list {\n"
                           "  config {\n"
                           "    name: \"cancer\"\n"
                           "    base_path: \"" << a.string() << "\"\n"
                           "    model_platform: \"tensorflow\"\n"
                           "    model_version_policy { latest { num_versions: 2 } }\n"
                           "    version_labels { key: \"stable\" value: 2 }\n"
                           "    version_labels { key: \"canary\" value: 3 }\n"
                           "  }\n"
                           "  config {\n"
                           "    name: \"second\"\n"
                           "    base_path: \"" << b.string() << "\"\n"
                           "    model_version_policy { specific { versions: 1 versions: 3 } }\n"
                           "  }\n"
                           "}\n";
  auto rows = feature_rows();
  ServeProcess server({"--model_config_file", config.string(), "--file_system_poll_wait_seconds", "1"});
  REQUIRE_MESSAGE(server.started(), server.log());
  int port = server.port();

  // cancer, latest 2: versions 2 and 3 load, 1 never does.
  CHECK(versions_in(port, "cancer", "AVAILABLE") == std::vector<int64_t>{2, 3});
  CHECK(http_call(port, "GET", "/v1/models/cancer/versions/1").status == 404);
  // second, specific {1, 3}: 2 is left alone.
  CHECK(versions_in(port, "second", "AVAILABLE") == std::vector<int64_t>{1, 3});

  auto seed1 = predict(port, "/v1/models/cancer/versions/3:predict", rows);
  auto seed2 = predict(port, "/v1/models/cancer/versions/2:predict", rows);
  REQUIRE(seed1.size() == 16);
  REQUIRE(seed2.size() == 16);
  CHECK(seed1 != seed2);  // the two trainings differ, so the checks below tell versions apart
  // Without a version: the newest served.
  CHECK(predict(port, "/v1/models/cancer:predict", rows) == seed1);
  CHECK(predict(port, "/v1/models/second:predict", rows) == seed2);
  CHECK(predict(port, "/v1/models/second/versions/1:predict", rows) == seed2);
  // Labels name versions.
  CHECK(predict(port, "/v1/models/cancer/labels/stable:predict", rows) == seed2);
  CHECK(predict(port, "/v1/models/cancer/labels/canary:predict", rows) == seed1);
  // Not served: 404 (a version the policy leaves out, an unknown model); an unknown label: 400.
  CHECK(http_call(port, "POST", "/v1/models/cancer/versions/1:predict", instances_body(rows, 0, 1)).status == 404);
  CHECK(http_call(port, "POST", "/v1/models/second/versions/2:predict", instances_body(rows, 0, 1)).status == 404);
  CHECK(http_call(port, "POST", "/v1/models/third:predict", instances_body(rows, 0, 1)).status == 404);
  auto bad_label = http_call(port, "POST", "/v1/models/cancer/labels/nightly:predict", instances_body(rows, 0, 1));
  CHECK(bad_label.status == 400);
  CHECK(bad_label.body.find("nightly") != std::string::npos);
  // Metadata names the model and the version that answers.
  auto meta = http_call(port, "GET", "/v1/models/second/metadata").doc();
  CHECK(meta["model_spec"]["name"] == "second");
  CHECK(meta["model_spec"]["version"] == "3");
  CHECK(http_call(port, "GET", "/v1/models/cancer/labels/stable/metadata").doc()["model_spec"]["version"] == "2");
  auto labelled = http_call(port, "GET", "/v1/models/cancer/labels/canary").doc();
  REQUIRE(labelled["model_version_status"].size() == 1);
  CHECK(labelled["model_version_status"][0]["version"] == "3");
  CHECK(http_call(port, "GET", "/v1/models/cancer/labels/nightly").status == 400);
  auto m = http_call(port, "GET", "/metrics");
  CHECK(metric(m.body, "actorflow_serve_model_version{model=\"cancer\"}") == 3);
  CHECK(metric(m.body, "actorflow_serve_model_version{model=\"second\"}") == 3);

  // A new version of cancer: latest 2 is then {3, 4}, and 2 unloads.
  fs::copy(a / "2", work.path / "staging4", fs::copy_options::recursive);
  fs::rename(work.path / "staging4", a / "4");
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline && versions_in(port, "cancer", "AVAILABLE") != std::vector<int64_t>{3, 4})
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  CHECK(versions_in(port, "cancer", "AVAILABLE") == std::vector<int64_t>{3, 4});
  CHECK(predict(port, "/v1/models/cancer:predict", rows) == seed2);
  deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline && versions_in(port, "cancer", "END") != std::vector<int64_t>{2})
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  CHECK(versions_in(port, "cancer", "END") == std::vector<int64_t>{2});
  CHECK(http_call(port, "POST", "/v1/models/cancer/versions/2:predict", instances_body(rows, 0, 1)).status == 404);
  // second's policy did not change.
  CHECK(versions_in(port, "second", "AVAILABLE") == std::vector<int64_t>{1, 3});
}

TEST_CASE("a broken model config file stops the server at start, naming the problem") {
  if (::access(serve_binary().c_str(), X_OK) != 0) aft::skip("serving test skipped: " + serve_binary() + " is not built");
  TempDir work("config_bad");
  fs::path base = work.path / "m";
  fs::create_directories(base);
  int help_rc = 0;
  if (run_to_exit({"--help"}, &help_rc).find("--model_config_file") == std::string::npos)
    aft::skip("actorflow-serve was built without protobuf: no --model_config_file");
  struct Bad {
    std::string text;
    std::string expect;  // in the error
  };
  std::string path_line = "base_path: \"" + base.string() + "\"";
  std::vector<Bad> cases = {
      {"model_config_list { config { name: \"a\" " + path_line + " }", "line 1"},
      {"model_config_list {\n config { name: \"a\"\n bogus_field: 1 } }", "line 3"},
      {"model_config_list { }", "lists no model"},
      {"model_config_list { config { name: \"a\" } }", "base_path is missing"},
      {"model_config_list { config { " + path_line + " } }", "name is missing"},
      {"model_config_list { config { name: \"a b\" " + path_line + " } }", "may hold letters"},
      {"model_config_list { config { name: \"a\" " + path_line + " } config { name: \"a\" " + path_line + " } }", "another config has this name"},
      {"model_config_list { config { name: \"a\" " + path_line + " model_platform: \"pytorch\" } }", "pytorch"},
      {"model_config_list { config { name: \"a\" " + path_line + " model_version_policy { specific { } } } }", "lists no version"},
      {"model_config_list { config { name: \"a\" " + path_line + " version_labels { key: \"x\" value: 0 } } }", "version label 'x'"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    fs::path f = work.path / ("bad" + std::to_string(i) + ".config");
    std::ofstream(f) << cases[i].text;
    int rc = 0;
    std::string out = run_to_exit({"--model_config_file", f.string()}, &rc);
    INFO("config: " << cases[i].text << "\noutput: " << out);
    CHECK(rc == 2);
    CHECK(out.find(cases[i].expect) != std::string::npos);
    CHECK(out.find(f.string()) != std::string::npos);  // the error names the file
  }
  // The config file and --model_name at once: refused.
  fs::path good = work.path / "good.config";
  std::ofstream(good) << "model_config_list { config { name: \"a\" " << path_line << " } }";
  int rc = 0;
  std::string out = run_to_exit({"--model_config_file", good.string(), "--model_name", "a", "--model_base_path", base.string()}, &rc);
  CHECK(rc == 2);
  CHECK(out.find("not both") != std::string::npos);
  // A command line from before the gRPC API (--port as the REST port) is told what changed.
  // (Nothing listens on 18501: the check comes before either API binds; `timeout` ends the
  // server should it not.)
  std::string cmd = "timeout -s KILL 60 " + serve_binary() + " --host 127.0.0.1 --model_config_file '" + good.string() +
                    "' --port 18501 --rest_api_port 18501 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  REQUIRE(p);
  std::string same;
  char buf[4096];
  while (fgets(buf, sizeof buf, p)) same += buf;
  int status = pclose(p);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 2);
  CHECK(same.find("--port is the gRPC port") != std::string::npos);
}
