// The samples' command line: switches, checked models and networks, flags honoured or
// refused, what --mode train says when it resumes, and how inference tells CSV from IDX.
#include <doctest/doctest.h>

#include <actorflow/actorflow.h>
#include <actorflow/ops/cuda_info.h>
#include <actorflow/saver.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <sys/wait.h>
#include <unistd.h>

#include "kit/device.h"
#include "kit/flags.h"
#include "kit/models.h"
#include "kit/trainer.h"

namespace af = actorflow;
namespace fs = std::filesystem;

namespace {

kit::ParsedFlags parse(std::vector<std::string> args, std::vector<std::string> models = {"lr", "dnn"}) {
  args.insert(args.begin(), "sample");
  std::vector<const char*> argv;
  for (auto& a : args) argv.push_back(a.c_str());
  return kit::try_parse_flags(static_cast<int>(argv.size()), argv.data(), {"sample", models}, kit::Flags{});
}

fs::path fresh_dir(const std::string& name) {
  fs::path dir = fs::temp_directory_path() / ("af_test_flags_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

struct Run {
  int exit_code = -1;
  std::string output;
};

// A sample binary run in `dir`, stdout and stderr together.
Run run_sample(const std::string& name, const std::string& args, const fs::path& dir) {
  std::string cmd = "cd " + dir.string() + " && " + std::string(AF_SAMPLES_DIR) + "/" + name + " " + args + " 2>&1";
  Run r;
  FILE* p = popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  char buf[4096];
  while (fgets(buf, sizeof buf, p)) r.output += buf;
  int status = pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

}  // namespace

TEST_CASE("flags: --enable_bn, --enable_dropout, --enable_lr_decay are switches that take =true/=false") {
  auto on = parse({"--enable_bn", "--enable_dropout", "--enable_lr_decay", "--epoch_number", "3"});
  REQUIRE_MESSAGE(on.exit_code < 0, on.message);
  CHECK(on.flags.enable_bn);
  CHECK(on.flags.enable_dropout);
  CHECK(on.flags.enable_lr_decay);
  CHECK(on.flags.epoch_number == 3);
  auto off = parse({"--enable_bn=false", "--enable_dropout=true", "--noenable_lr_decay"});
  REQUIRE_MESSAGE(off.exit_code < 0, off.message);
  CHECK_FALSE(off.flags.enable_bn);
  CHECK(off.flags.enable_dropout);
  CHECK_FALSE(off.flags.enable_lr_decay);
  CHECK(off.flags.given.count("--enable_bn"));
  CHECK_FALSE(off.flags.given.count("--model"));
}

TEST_CASE("flags: --model must be one of the sample's models, and the error lists them") {
  auto ok = parse({"--model", "dnn"});
  REQUIRE_MESSAGE(ok.exit_code < 0, ok.message);
  CHECK(ok.flags.model == "dnn");
  auto bad = parse({"--model", "cnn"});
  CHECK(bad.exit_code > 0);
  CHECK(bad.message.find("'cnn' is not a model of sample") != std::string::npos);
  CHECK(bad.message.find("lr, dnn") != std::string::npos);
}

TEST_CASE("flags: --model_network takes spaces or commas, and refuses anything else") {
  for (const char* text : {"128,32", "128 32", "128, 32"}) {
    CAPTURE(text);
    auto r = parse({"--model_network", text});
    REQUIRE_MESSAGE(r.exit_code < 0, r.message);
    CHECK(r.flags.network() == std::vector<int>{128, 32});
  }
  auto bad = parse({"--model_network", "128,x"});
  CHECK(bad.exit_code > 0);
  CHECK(bad.message.find("'x'") != std::string::npos);
  CHECK(parse({"--model_network", "128,-4"}).exit_code > 0);
}

TEST_CASE("flags: a flag that does not apply is refused by name") {
  auto r = parse({"--model_network", "64", "--enable_bn"});
  REQUIRE(r.exit_code < 0);
  CHECK(kit::unsupported_flags(r.flags, {"--model_network", "--enable_bn", "--enable_dropout"}, "to --model cnn") ==
        "--model_network, --enable_bn do not apply to --model cnn");
  CHECK(kit::unsupported_flags(r.flags, {"--enable_dropout"}, "here").empty());
  CHECK(kit::fashion_mnist_unused_flags("cnn") == std::vector<std::string>{"--model_network", "--enable_bn", "--enable_dropout"});
}

TEST_CASE("flags: the samples refuse unknown models and flags that do not apply, before reading data") {
  fs::path dir = fresh_dir("cli");
  auto model = run_sample("cancer_classifier", "--model cnn", dir);
  CHECK(model.exit_code == 2);
  CHECK(model.output.find("lr, dnn") != std::string::npos);
  auto lr = run_sample("cancer_classifier", "--model lr --enable_bn", dir);
  CHECK(lr.exit_code == 2);
  CHECK(lr.output.find("--enable_bn does not apply to --model lr") != std::string::npos);
  auto cnn = run_sample("fashion_mnist", "--model cnn --model_network 64", dir);
  CHECK(cnn.exit_code == 2);
  CHECK(cnn.output.find("--model_network does not apply to --model cnn") != std::string::npos);
  auto mixed = run_sample("cancer_classifier", "--compute_type bfloat16", dir);
  CHECK(mixed.exit_code == 2);
  CHECK(mixed.output.find("--compute_type does not apply to cancer_classifier") != std::string::npos);
  auto half = run_sample("fashion_mnist", "--compute_type float16", dir);
  CHECK(half.exit_code == 2);
  CHECK(half.output.find("compute type") != std::string::npos);
  auto linreg = run_sample("linear_regression", "--learning_rate 0.5", dir);
  CHECK(linreg.exit_code != 0);
  CHECK(linreg.output.find("--learning_rate") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("flags: --compute_type bfloat16 builds fashion_mnist's convolutions and products in bfloat16") {
  for (const char* model : {"cnn", "mlp"}) {
    INFO(model);
    kit::Flags f = kit::fashion_mnist_defaults();
    f.model = model;
    f.compute_type = "bfloat16";
    af::Graph g;
    kit::Model m = kit::fashion_mnist_model(g, f);
    (void)af::gradients({m.loss}, {af::Output(&g, g.collection("trainable_variables").front(), 0)});
    int marked = 0, unmarked = 0;
    for (int i = 0; i < g.num_nodes(); ++i) {
      const af::Node& n = g.node(i);
      if (n.op != "Conv2D" && n.op != "MatMul" && n.op != "Conv2DBackpropFilter") continue;
      (n.attr_string("compute_type") == "bfloat16" ? marked : unmarked)++;
    }
    CHECK(marked >= (std::string(model) == "cnn" ? 5 : 3));
    CHECK(unmarked == 0);
  }
}

TEST_CASE("flags: wide_and_deep trains its deep part with --optimizer") {
  if (!fs::exists(kit::kBreastCancerCsv)) {
    MESSAGE("python3-sklearn is not installed: " << kit::kBreastCancerCsv);
    return;
  }
  fs::path dir = fresh_dir("wide_deep");
  auto r = run_sample("wide_and_deep", "--optimizer adam --epoch_number 1 --max_steps 2 --steps_to_validate 0", dir);
  REQUIRE_MESSAGE(r.exit_code == 0, r.output);
  auto latest = af::latest_checkpoint((dir / "checkpoint/wide_and_deep/wide_deep").string());
  REQUIRE_MESSAGE(latest.ok(), latest.status().to_string());
  auto tensors = af::read_safetensors(*latest);
  REQUIRE(tensors.ok());
  int adam_slots = 0, adagrad_slots = 0;
  for (auto& t : *tensors) {
    if (t.name.rfind("deep/", 0) != 0) continue;
    adam_slots += t.name.find("/Adam") != std::string::npos;
    adagrad_slots += t.name.find("/Adagrad") != std::string::npos;
  }
  CHECK(adam_slots > 0);
  CHECK(adagrad_slots == 0);
  fs::remove_all(dir);
}

TEST_CASE("flags: --mode train says where it resumes, and says when no epochs are left") {
  // 8 examples of y = (x > 0), batch 4: two steps an epoch.
  kit::Split data;
  data.x_train = af::Tensor::from_vector<float>({-2, -1, -0.5f, -0.1f, 0.1f, 0.5f, 1, 2}, {8, 1});
  data.y_train = af::Tensor::from_vector<int64_t>({0, 0, 0, 0, 1, 1, 1, 1}, {8});
  data.x_test = data.x_train;
  data.y_test = data.y_train;
  fs::path dir = fresh_dir("resume");
  kit::Flags f;
  f.batch_size = 4;
  f.steps_to_validate = 0;
  f.checkpoint_path = (dir / "ckpt").string();
  f.output_path = (dir / "tb").string();
  auto train = [&](int epochs) {
    f.epoch_number = epochs;
    af::Graph g;
    kit::Model m;
    m.x = af::placeholder(g, af::f32, {-1, 1}, "x");
    m.y = af::placeholder(g, af::i64, {-1}, "y");
    auto logit = af::reshape(af::layers::dense(m.x, 1, {}, "logit"), {-1});
    m.loss = af::mean(af::sigmoid_cross_entropy_with_logits(logit, af::cast(m.y, af::f32)));
    m.prediction = af::sigmoid(logit, "probability");
    std::ostringstream captured;
    auto* old = std::cout.rdbuf(captured.rdbuf());
    auto r = kit::train(g, m, data, f);
    std::cout.rdbuf(old);
    REQUIRE_MESSAGE(r.ok(), r.status().to_string());
    return std::make_pair(*r, captured.str());
  };
  auto [first, first_out] = train(2);
  CHECK(first.steps == 4);
  CHECK(first_out.find("resuming") == std::string::npos);
  auto [second, second_out] = train(3);
  CHECK(second.steps == 6);
  CHECK(second_out.find("resuming from " + f.checkpoint_path + "/model.ckpt-4") != std::string::npos);
  CHECK(second_out.find("at epoch 3, step 4") != std::string::npos);
  auto [third, third_out] = train(3);
  CHECK(third.steps == 6);
  CHECK(third.epochs == 3);
  CHECK(third_out.find("nothing to train") != std::string::npos);
  CHECK(third_out.find("finished 3 epochs (step 6) and --epoch_number is 3") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("flags: inference inputs are CSV or IDX by their content or --inference_format, not their name") {
  fs::path dir = fresh_dir("inference");
  // CSV rows in a file whose name says idx.
  std::string csv = (dir / "rows.idx.csv").string();
  std::ofstream(csv) << "1,2\n3,4\n5,6\n";
  // An IDX file of u8 [3, 2] whose name does not.
  std::string idx = (dir / "pixels.bin").string();
  std::ofstream(idx, std::ios::binary) << std::string("\0\0\x08\x02\0\0\0\x03\0\0\0\x02", 12) << std::string("\0\xff\x33\0\0\0", 6);
  CHECK(kit::detect_input_format(csv).value() == "csv");
  CHECK(kit::detect_input_format(idx).value() == "idx");
  auto rows = kit::load_inference_inputs(csv, "auto", 2);
  REQUIRE_MESSAGE(rows.ok(), rows.status().to_string());
  CHECK(rows->to_vector<float>() == std::vector<float>{1, 2, 3, 4, 5, 6});
  auto pixels = kit::load_inference_inputs(idx, "auto", 2);
  REQUIRE_MESSAGE(pixels.ok(), pixels.status().to_string());
  CHECK(pixels->shape() == af::Shape{3, 2});
  CHECK(pixels->to_vector<float>()[1] == doctest::Approx(1.0));
  CHECK(pixels->to_vector<float>()[2] == doctest::Approx(0.2));
  // The flag overrides the content: the IDX file read as CSV fails, naming the format.
  auto forced = kit::load_inference_inputs(idx, "csv", 2);
  CHECK_FALSE(forced.ok());
  auto flag = parse({"--inference_format", "idx"});
  REQUIRE(flag.exit_code < 0);
  CHECK(flag.flags.inference_format == "idx");
  CHECK(parse({"--inference_format", "png"}).exit_code > 0);
  fs::remove_all(dir);
}

TEST_CASE("flags: --device: cpu by default, gpu accepted, anything else refused; gpu without a GPU is an error") {
  kit::Flags defaults = kit::sample_defaults("fashion_mnist");
  const char* none[] = {"prog"};
  auto d = kit::try_parse_flags(1, none, {"fashion_mnist", {"mlp"}}, defaults);
  REQUIRE(d.exit_code < 0);
  CHECK(d.flags.device == "cpu");
  CHECK(kit::device_error(d.flags, false).empty());
  const char* gpu[] = {"prog", "--device", "gpu"};
  auto g = kit::try_parse_flags(3, gpu, {"fashion_mnist", {"mlp"}}, defaults);
  REQUIRE(g.exit_code < 0);
  CHECK(g.flags.device == "gpu");
  const char* tpu[] = {"prog", "--device=tpu"};
  auto t = kit::try_parse_flags(2, tpu, {"fashion_mnist", {"mlp"}}, defaults);
  CHECK(t.exit_code == 2);
  CHECK(t.message.find("'tpu' is not a device") != std::string::npos);
  // A ps cluster refuses it naming the strategy that takes it; an all-reduce cluster takes
  // it as one process does (no GPU here: the same error as locally).
  CHECK(kit::device_error(g.flags, true).find("needs --strategy allreduce") != std::string::npos);
  const char* gpu_ar[] = {"prog", "--device", "gpu", "--strategy", "allreduce"};
  auto ar = kit::try_parse_flags(5, gpu_ar, {"fashion_mnist", {"mlp"}}, defaults);
  REQUIRE(ar.exit_code < 0);
  if (af::cuda_device_count() == 0) {
    const std::string e = kit::device_error(g.flags, false);
    CHECK(e.find("--device gpu: no GPU found") != std::string::npos);
    CHECK(kit::device_error(ar.flags, true) == e);
  } else {
    CHECK(kit::device_error(g.flags, false).empty());
    CHECK(kit::device_error(ar.flags, true).empty());
  }
}
