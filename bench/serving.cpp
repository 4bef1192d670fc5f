// The `serving` case's C++ half (the case itself runs in bench/python/serving_case.py,
// which starts build/tools/actorflow-serve and drives it with wrk):
//
//   build/bench/serving --export DIR
//     trains the Fashion-MNIST MLP (784-256-128-10, kit::fashion_mnist_model) 100 SGD
//     steps, exports it with af::export_model as DIR/1 (what `--mode export` writes and
//     actorflow-serve loads), and writes DIR/body.json (one test row as TensorFlow
//     Serving's `{"instances": [[784 floats]]}`) and DIR/expected.json (its class);
//   build/bench/serving --in-process DIR/1 --seconds S --callers C[,C...] --rows R
//                       [--polling standalone|shared]
//     the limit: the same export loaded by af::ServedModel with the server's session
//     options (the defaults), C threads each calling predict on R rows back to back for
//     S seconds; prints one JSON line per C with calls/s and per-call p50/p99. --polling
//     sets how idle actor-scheduler threads wait (runtime/scheduler_polling.h): polling
//     (standalone, the library's default) or on a condition variable (shared, what
//     actorflow-serve uses); the case takes the faster.
//   build/bench/serving --grpc-load PORT --seconds S --concurrency C [--threads T]
//                       [--delay-ms D] [--expect K]
//     the gRPC client (built where actorflow-serve has gRPC): PredictionService.Predict
//     of the first Fashion-MNIST test row (a TensorProto with tensor_content) to model
//     "fashion" on 127.0.0.1:PORT, C calls in flight over T threads (a channel and a
//     completion queue each), for S seconds. With --delay-ms, a call slot waits a random
//     0..2D ms (D may be a fraction) after each answer before its next call, as the
//     case's wrk script does;
//     a call is timed from its start. Every answer must be class K (--expect). Prints one
//     JSON line: calls/s, p50/p99, errors.
//
// Any other command line is the bench harness's (it registers no case: `--serve` answers
// an empty list to bench/python/driver.py).
#include <actorflow/actorflow.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <actorflow/runtime/scheduler_polling.h>

#if AF_SERVE_GRPC
#include <grpcpp/grpcpp.h>

#include <map>
#include <random>

#include "tensorflow_serving/apis/prediction_service.grpc.pb.h"
#endif

#include "harness/bench.h"
#include "kit/datasets.h"
#include "kit/models.h"

namespace af = actorflow;
namespace fs = std::filesystem;

namespace {

int export_model(const std::string& dir) {
  auto data = kit::load_fashion_mnist(kit::kFashionMnistDir);
  if (!data.ok()) {
    std::fprintf(stderr, "serving: %s\n", data.status().to_string().c_str());
    return 1;
  }
  af::Graph g;
  g.set_seed(1);
  kit::Flags flags;
  flags.model = "mlp";
  flags.model_network = "256 128";
  kit::Model m = kit::fashion_mnist_model(g, flags);
  auto train = af::optim::GradientDescent(0.1).minimize(m.loss);
  auto sess = af::Session::create(g).value();
  if (!sess.run_init().ok()) return 1;
  for (int64_t s = 0; s < 100; ++s) {
    int64_t b = s * 64;
    auto step = sess.run({}, {{m.x, data->x_train.slice_rows(b, b + 64)}, {m.y, data->y_train.slice_rows(b, b + 64)}},
                         {train});
    if (!step.ok()) {
      std::fprintf(stderr, "serving: training step: %s\n", step.status().to_string().c_str());
      return 1;
    }
  }
  af::Tensor row = data->x_test.slice_rows(0, 1);
  auto pred = sess.run({m.prediction}, {{m.x, row}});
  if (!pred.ok()) return 1;
  fs::create_directories(dir);
  if (auto s = af::export_model(sess, g, m.x, m.prediction, dir + "/1"); !s.ok()) {
    std::fprintf(stderr, "serving: export: %s\n", s.to_string().c_str());
    return 1;
  }
  {
    std::ofstream body(dir + "/body.json");
    body << "{\"instances\": [[";
    const float* p = row.data<float>();
    char buf[32];
    for (int64_t i = 0; i < row.num_elements(); ++i) {
      std::snprintf(buf, sizeof buf, "%s%.6g", i ? "," : "", static_cast<double>(p[i]));
      body << buf;
    }
    body << "]]}";
  }
  std::ofstream(dir + "/expected.json") << "[" << static_cast<int64_t>((*pred)[0].element_as_double(0)) << "]\n";
  std::printf("{\"ok\": true, \"export\": \"%s/1\"}\n", dir.c_str());
  return 0;
}

int in_process(const std::string& dir, double seconds, const std::vector<int>& caller_counts, int64_t rows) {
  auto loaded = af::ServedModel::load(dir);  // the server's session options: the defaults
  if (!loaded.ok()) {
    std::fprintf(stderr, "serving: load %s: %s\n", dir.c_str(), loaded.status().to_string().c_str());
    return 1;
  }
  af::ServedModel model = std::move(*loaded);
  auto data = kit::load_fashion_mnist(kit::kFashionMnistDir);
  if (!data.ok()) return 1;
  af::Tensor x = data->x_test.slice_rows(0, rows);
  // Warm-up: the first runs build the plan and fill the allocator's pools.
  for (int i = 0; i < 50; ++i)
    if (!model.predict(x).ok()) return 1;
  for (int callers : caller_counts) {
    std::vector<std::vector<double>> lat(callers);
    std::atomic<bool> failed{false};
    auto t0 = bench::Clock::now();
    auto end = t0 + std::chrono::duration_cast<bench::Clock::duration>(std::chrono::duration<double>(seconds));
    std::vector<std::thread> ts;
    for (int c = 0; c < callers; ++c)
      ts.emplace_back([&, c] {
        while (bench::Clock::now() < end) {
          auto s = bench::Clock::now();
          auto out = model.predict(x);
          lat[c].push_back(bench::seconds_since(s) * 1e3);
          if (!out.ok() || out->dim(0) != rows) {
            failed = true;
            return;
          }
        }
      });
    for (auto& t : ts) t.join();
    double wall = bench::seconds_since(t0);
    if (failed) {
      std::fprintf(stderr, "serving: an in-process predict failed\n");
      return 1;
    }
    std::vector<double> all;
    for (auto& l : lat) all.insert(all.end(), l.begin(), l.end());
    std::sort(all.begin(), all.end());
    auto pct = [&](double q) {
      return all.empty() ? 0.0 : all[std::min(all.size() - 1, static_cast<size_t>(q * all.size()))];
    };
    std::printf("{\"ok\": true, \"callers\": %d, \"rows\": %lld, \"calls\": %zu, \"seconds\": %.3f, \"calls_per_s\": %.1f, "
                "\"rows_per_s\": %.1f, \"p50_ms\": %.4f, \"p99_ms\": %.4f}\n",
                callers, static_cast<long long>(rows), all.size(), wall, all.size() / wall, all.size() * rows / wall, pct(0.50),
                pct(0.99));
    std::fflush(stdout);
  }
  return 0;
}

#if AF_SERVE_GRPC
// One thread of the gRPC load: its own channel (not shared with the other threads'), its
// own completion queue, `slots` calls in flight.
struct GrpcLoadThread {
  int64_t ok = 0, errors = 0;
  std::vector<double> lat_ms;
  std::string first_error;
};

void grpc_load_thread(int port, const tensorflow::serving::PredictRequest& req, int slots, double delay_ms, int64_t expect,
                      bench::Clock::time_point end, unsigned seed, GrpcLoadThread* out) {
  namespace tfs = tensorflow::serving;
  using Clock = bench::Clock;
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  auto stub = tfs::PredictionService::NewStub(
      grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials(), args));
  grpc::CompletionQueue cq;
  struct Call {
    grpc::ClientContext ctx;
    tfs::PredictResponse resp;
    grpc::Status status;
    std::unique_ptr<grpc::ClientAsyncResponseReader<tfs::PredictResponse>> rpc;
    Clock::time_point start;
    int slot = 0;
  };
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int64_t> think(0, static_cast<int64_t>(2 * std::max(0.0, delay_ms) * 1000));
  std::multimap<Clock::time_point, int> waiting;  // slots thinking, by when they call again
  int outstanding = 0;
  auto issue = [&](int slot) {
    auto* c = new Call;
    c->slot = slot;
    c->ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    c->start = Clock::now();
    c->rpc = stub->AsyncPredict(&c->ctx, req, &cq);
    c->rpc->Finish(&c->resp, &c->status, c);
    ++outstanding;
  };
  auto next = [&](int slot) {
    if (delay_ms > 0) waiting.emplace(Clock::now() + std::chrono::microseconds(think(rng)), slot);
    else issue(slot);
  };
  for (int s = 0; s < slots; ++s) next(s);
  const auto give_up = end + std::chrono::seconds(15);
  while (outstanding > 0 || (!waiting.empty() && Clock::now() < end)) {
    auto now = Clock::now();
    if (now > give_up) break;
    auto wake = now + std::chrono::milliseconds(50);
    if (!waiting.empty()) wake = std::min(wake, waiting.begin()->first);
    void* tag = nullptr;
    bool ok = false;
    auto st = cq.AsyncNext(&tag, &ok, std::chrono::system_clock::now() + (wake - now));
    if (st == grpc::CompletionQueue::SHUTDOWN) break;
    if (st == grpc::CompletionQueue::GOT_EVENT) {
      auto* c = static_cast<Call*>(tag);
      --outstanding;
      auto done = Clock::now();
      if (done <= end) {
        std::string why;
        if (!ok || !c->status.ok()) why = "status " + std::to_string(c->status.error_code()) + ": " + c->status.error_message();
        else {
          auto it = c->resp.outputs().begin();
          if (c->resp.outputs().size() != 1 || it->second.int64_val_size() != 1 || it->second.int64_val(0) != expect)
            why = "the answer is not class " + std::to_string(expect) + ": " + c->resp.ShortDebugString().substr(0, 200);
        }
        if (why.empty()) {
          ++out->ok;
          out->lat_ms.push_back(std::chrono::duration<double, std::milli>(done - c->start).count());
        } else {
          if (out->errors++ == 0) out->first_error = why;
        }
        next(c->slot);
      }
      delete c;
    }
    now = Clock::now();
    while (!waiting.empty() && waiting.begin()->first <= now) {
      int slot = waiting.begin()->second;
      waiting.erase(waiting.begin());
      if (now < end) issue(slot);
    }
  }
  cq.Shutdown();
  void* tag = nullptr;
  bool ok = false;
  while (cq.Next(&tag, &ok)) delete static_cast<Call*>(tag);
}

int grpc_load(int port, double seconds, int concurrency, int threads, double delay_ms, int64_t expect) {
  auto data = kit::load_fashion_mnist(kit::kFashionMnistDir);
  if (!data.ok()) {
    std::fprintf(stderr, "serving: %s\n", data.status().to_string().c_str());
    return 1;
  }
  af::Tensor row = data->x_test.slice_rows(0, 1);
  tensorflow::serving::PredictRequest req;
  req.mutable_model_spec()->set_name("fashion");
  auto& x = (*req.mutable_inputs())["x"];
  x.set_dtype(tensorflow::DT_FLOAT);
  x.mutable_tensor_shape()->add_dim()->set_size(1);
  x.mutable_tensor_shape()->add_dim()->set_size(row.num_elements());
  x.set_tensor_content(std::string(static_cast<const char*>(row.raw_data()), row.bytes()));
  threads = std::max(1, std::min(threads, concurrency));
  std::vector<GrpcLoadThread> results(threads);
  std::vector<std::thread> ts;
  auto t0 = bench::Clock::now();
  auto end = t0 + std::chrono::duration_cast<bench::Clock::duration>(std::chrono::duration<double>(seconds));
  for (int t = 0; t < threads; ++t) {
    int slots = concurrency / threads + (t < concurrency % threads ? 1 : 0);
    ts.emplace_back(grpc_load_thread, port, std::cref(req), slots, delay_ms, expect, end, 1234u + t, &results[t]);
  }
  for (auto& t : ts) t.join();
  double wall = std::min(bench::seconds_since(t0), seconds);
  int64_t ok = 0, errors = 0;
  std::string first_error;
  std::vector<double> all;
  for (auto& r : results) {
    ok += r.ok;
    errors += r.errors;
    if (first_error.empty()) first_error = r.first_error;
    all.insert(all.end(), r.lat_ms.begin(), r.lat_ms.end());
  }
  std::sort(all.begin(), all.end());
  auto pct = [&](double q) { return all.empty() ? 0.0 : all[std::min(all.size() - 1, static_cast<size_t>(q * all.size()))]; };
  for (char& c : first_error)
    if (c == '"' || c == '\\' || static_cast<unsigned char>(c) < 0x20) c = '?';
  std::printf("{\"ok\": %s, \"requests\": %lld, \"errors\": %lld, \"seconds\": %.3f, \"rps\": %.1f, \"p50_ms\": %.4f, "
              "\"p99_ms\": %.4f, \"concurrency\": %d, \"threads\": %d, \"delay_ms\": %.4f, \"first_error\": \"%s\"}\n",
              errors == 0 && ok > 0 ? "true" : "false", static_cast<long long>(ok), static_cast<long long>(errors), wall, ok / wall,
              pct(0.50), pct(0.99), concurrency, threads, delay_ms, first_error.c_str());
  std::fflush(stdout);
  return errors == 0 && ok > 0 ? 0 : 1;
}
#endif

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 3 && std::strcmp(argv[1], "--grpc-load") == 0) {
#if AF_SERVE_GRPC
    double seconds = 3;
    int concurrency = 64, threads = 1;
    double delay_ms = 0;
    int64_t expect = 0;
    for (int i = 3; i + 1 < argc; i += 2) {
      std::string a = argv[i];
      if (a == "--seconds") seconds = std::atof(argv[i + 1]);
      else if (a == "--concurrency") concurrency = std::max(1, std::atoi(argv[i + 1]));
      else if (a == "--threads") threads = std::max(1, std::atoi(argv[i + 1]));
      else if (a == "--delay-ms") delay_ms = std::max(0.0, std::atof(argv[i + 1]));
      else if (a == "--expect") expect = std::atoll(argv[i + 1]);
      else {
        std::fprintf(stderr, "serving: unknown option %s\n", a.c_str());
        return 2;
      }
    }
    return grpc_load(std::atoi(argv[2]), seconds, concurrency, threads, delay_ms, expect);
#else
    std::printf("{\"ok\": false, \"error\": \"built without gRPC (libgrpc++-dev)\"}\n");
    return 3;
#endif
  }
  if (argc >= 3 && std::strcmp(argv[1], "--export") == 0) return export_model(argv[2]);
  if (argc >= 3 && std::strcmp(argv[1], "--in-process") == 0) {
    double seconds = 3;
    std::vector<int> callers;
    int64_t rows = 1;
    for (int i = 3; i + 1 < argc; i += 2) {
      std::string a = argv[i];
      if (a == "--seconds") seconds = std::atof(argv[i + 1]);
      else if (a == "--callers") {
        std::string list = argv[i + 1];
        for (size_t b = 0; b < list.size();) {
          size_t e = list.find(',', b);
          if (e == std::string::npos) e = list.size();
          callers.push_back(std::max(1, std::atoi(list.substr(b, e - b).c_str())));
          b = e + 1;
        }
      }
      else if (a == "--rows") rows = std::max(1, std::atoi(argv[i + 1]));
      else if (a == "--polling") {
        std::string p = argv[i + 1];
        if (p != "standalone" && p != "shared") {
          std::fprintf(stderr, "serving: --polling takes standalone or shared\n");
          return 2;
        }
        (void)af::runtime::set_scheduler_polling(p == "shared" ? af::runtime::SchedulerPolling::shared_cores()
                                                               : af::runtime::SchedulerPolling::standalone());
      }
      else {
        std::fprintf(stderr, "serving: unknown option %s\n", a.c_str());
        return 2;
      }
    }
    if (callers.empty()) callers.push_back(1);
    return in_process(argv[2], seconds, callers, rows);
  }
  return bench::main(argc, argv);
}
