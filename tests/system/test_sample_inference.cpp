// A sample's --mode inference as a user runs it: train briefly, export, then feed the raw
// data files (sklearn's breast_cancer.csv, Fashion-MNIST's t10k images) and score the
// predictions written to --inference_result_file against the labels. Whatever training did
// to the features (standardizing, scaling pixels) the export must do too, or these scores
// fall to chance while the training run's own test accuracy looks fine.
#include <doctest/doctest.h>

#include <actorflow/actorflow.h>
#include <actorflow/data/readers.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <unistd.h>

#include "kit/datasets.h"
#include "interop/skip.h"

namespace af = actorflow;
namespace ad = actorflow::data;
namespace fs = std::filesystem;

namespace {

struct Run {
  int rc = -1;
  std::string output;
  std::map<std::string, std::string> result;  // the RESULT line's key=value pairs
};

Run run_in(const fs::path& dir, const std::string& sample, const std::string& args) {
  std::string cmd = "cd " + dir.string() + " && " + std::string(AF_SAMPLES_DIR) + "/" + sample + " " + args + " 2>&1";
  Run r;
  FILE* p = popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  char buf[4096];
  std::string last;
  while (fgets(buf, sizeof buf, p)) {
    r.output += buf;
    if (std::string(buf).rfind("RESULT ", 0) == 0) last = buf;
  }
  r.rc = pclose(p);
  std::istringstream in(last.size() > 7 ? last.substr(7) : "");
  std::string tok;
  while (in >> tok)
    if (auto eq = tok.find('='); eq != std::string::npos) r.result[tok.substr(0, eq)] = tok.substr(eq + 1);
  return r;
}

std::vector<std::vector<double>> read_rows(const fs::path& file) {
  std::vector<std::vector<double>> rows;
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::vector<double> row;
    for (double v; ls >> v;) row.push_back(v);
    rows.push_back(row);
  }
  return rows;
}

fs::path fresh_dir(const std::string& tag) {
  fs::path dir = fs::temp_directory_path() / ("af_sample_inference_" + tag + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// Trains `args` for the sample, exports it, runs inference on `inputs` and returns the
// training run's test accuracy and the predictions file's rows.
std::pair<double, std::vector<std::vector<double>>> train_export_infer(const fs::path& dir, const std::string& sample,
                                                                       const std::string& args, const std::string& inputs) {
  auto trained = run_in(dir, sample, args + " --mode train_from_scratch");
  INFO(trained.output);
  REQUIRE(trained.rc == 0);
  REQUIRE(trained.result.count("test_accuracy"));
  auto exported = run_in(dir, sample, args + " --mode export");
  INFO(exported.output);
  REQUIRE(exported.rc == 0);
  auto inferred = run_in(dir, sample, args + " --mode inference --inference_test_file " + inputs +
                                          " --inference_result_file " + (dir / "predictions.txt").string());
  INFO(inferred.output);
  REQUIRE(inferred.rc == 0);
  return {std::stod(trained.result.at("test_accuracy")), read_rows(dir / "predictions.txt")};
}

void need_breast_cancer() {
  if (!fs::exists(kit::kBreastCancerCsv))
    aft::skip(std::string("sample test skipped: python3-sklearn is not installed (") + kit::kBreastCancerCsv + ")");
}

// Every row of sklearn's file, raw, through the exported model: the split's test rows are
// among them and training saw the rest, so the share classified right can only be near or
// above the training run's test accuracy.
void check_breast_cancer_inference(const std::string& sample, const std::string& args) {
  need_breast_cancer();
  CAPTURE(sample);
  fs::path dir = fresh_dir(sample);
  auto got = train_export_infer(dir, sample, args, kit::kBreastCancerCsv);
  double test_accuracy = got.first;
  const auto& rows = got.second;
  auto data = ad::read_csv(kit::kBreastCancerCsv);
  REQUIRE(data.ok());
  int64_t n = data->labels.dim(0);
  REQUIRE(static_cast<int64_t>(rows.size()) == n);
  int64_t right = 0;
  for (int64_t i = 0; i < n; ++i) {
    REQUIRE(rows[static_cast<size_t>(i)].size() == 1);
    double p = rows[static_cast<size_t>(i)][0];
    CHECK(p >= 0.0);
    CHECK(p <= 1.0);
    right += (p > 0.5) == (data->labels.data<int64_t>()[i] == 1);
  }
  double accuracy = static_cast<double>(right) / static_cast<double>(n);
  INFO("inference accuracy " << accuracy << " over " << n << " rows; training run's test accuracy " << test_accuracy);
  CHECK(test_accuracy >= 0.9);
  CHECK(accuracy >= 0.9);
  CHECK(accuracy >= test_accuracy - 0.03);
  fs::remove_all(dir);
}

}  // namespace

TEST_CASE("needs python3-sklearn: cancer_classifier --mode inference classifies raw rows as training scored them") {
  check_breast_cancer_inference("cancer_classifier", "--model lr --epoch_number 5");
  check_breast_cancer_inference("cancer_classifier", "--model dnn --epoch_number 5");
}

TEST_CASE("needs python3-sklearn: wide_and_deep --mode inference classifies raw rows as training scored them") {
  check_breast_cancer_inference("wide_and_deep", "--epoch_number 5");
}

TEST_CASE("needs dataset-fashion-mnist: fashion_mnist --mode inference on the t10k IDX file scores as training did") {
  const std::string images = std::string(kit::kFashionMnistDir) + "/t10k-images-idx3-ubyte.gz";
  const std::string labels = std::string(kit::kFashionMnistDir) + "/t10k-labels-idx1-ubyte.gz";
  if (!fs::exists(images)) aft::skip("sample test skipped: dataset-fashion-mnist is not installed (" + images + ")");
  fs::path dir = fresh_dir("fashion_mnist");
  auto got = train_export_infer(dir, "fashion_mnist", "--model mlp --epoch_number 1 --max_steps 300", images);
  double test_accuracy = got.first;
  const auto& rows = got.second;
  auto y = ad::read_idx(labels);
  REQUIRE(y.ok());
  int64_t n = y->dim(0);
  REQUIRE(static_cast<int64_t>(rows.size()) == n);
  int64_t right = 0;
  for (int64_t i = 0; i < n; ++i) {
    const auto& row = rows[static_cast<size_t>(i)];
    REQUIRE(row.size() == 1);  // the model's prediction is the class id
    right += static_cast<int64_t>(row[0]) == static_cast<int64_t>(y->data<uint8_t>()[i]);
  }
  double accuracy = static_cast<double>(right) / static_cast<double>(n);
  INFO("inference accuracy " << accuracy << "; training run's test accuracy " << test_accuracy);
  // The t10k file is the training run's test set: the same rows, so the same score.
  CHECK(test_accuracy >= 0.7);
  CHECK(std::fabs(accuracy - test_accuracy) <= 0.002);
  fs::remove_all(dir);
}

// samples/fashion_mnist keeps its training images as bytes and scales each batch in the
// kit's input pipeline (kit::Pixels::u8, kit::training_batches): its batches must be those
// of f32 pixels scaled at load, bit for bit, shuffled or not, or its accuracy would move.
TEST_CASE("the kit's u8 pixel pipeline gives the f32 pipeline's batches bit for bit") {
  const int64_t n = 1000, f = 784;
  af::Tensor u8(af::u8, {n, f});
  af::Tensor y(af::i64, {n});
  for (int64_t i = 0; i < n * f; ++i) u8.data<uint8_t>()[i] = static_cast<uint8_t>((i * 7919 + i / 13) % 256);
  for (int64_t i = 0; i < n; ++i) y.data<int64_t>()[i] = i % 10;
  af::Tensor f32 = kit::features(u8);
  REQUIRE(f32.dtype() == af::f32);
  CHECK(f32.data<float>()[5] == static_cast<float>(u8.data<uint8_t>()[5]) / 255.0f);
  for (std::optional<uint64_t> seed : {std::optional<uint64_t>(), std::optional<uint64_t>(1000003u)}) {
    auto a = kit::training_batches(u8, y, 64, seed).make_iterator();
    auto b = kit::training_batches(f32, y, 64, seed).make_iterator();
    ad::Components ca, cb;
    int batches = 0;
    while (true) {
      auto ma = a->next(&ca);
      auto mb = b->next(&cb);
      REQUIRE(ma.ok());
      REQUIRE(mb.ok());
      REQUIRE(*ma == *mb);
      if (!*ma) break;
      ++batches;
      REQUIRE(ca[0].dtype() == af::f32);
      CHECK(ca[0].equals(cb[0]));
      CHECK(ca[1].equals(cb[1]));
    }
    CHECK(batches == 16);  // 15 of 64 and one of 40
  }
}
