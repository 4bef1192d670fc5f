// export_model and ServedModel through the public header: the export prunes the graph to
// input -> prediction and keeps the weights, the loaded model predicts what the trained
// session did (past the 1000-row batches predict cuts), and wrong inputs are errors.
#include <doctest/doctest.h>

#include <actorflow/saved_model.h>

#include <actorflow/dsl.h>

#include <filesystem>
#include <fstream>
#include <unistd.h>

namespace af = actorflow;
namespace fs = std::filesystem;

namespace {

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("af_saved_model_" + std::to_string(::getpid()));
  TempDir() { fs::remove_all(path); }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

// x f32 [?, 3] -> argmax(x w + b), with a loss the export must leave behind.
struct Tiny {
  af::Graph g;
  af::Output x, y, prediction, loss;
  Tiny() {
    x = af::placeholder(g, af::f32, {-1, 3}, "x");
    y = af::placeholder(g, af::f32, {-1, 2}, "y");
    auto w = af::variable(g, {3, 2}, af::glorot_uniform_initializer(7), "w");
    auto b = af::variable(g, {2}, af::constant_initializer(0.5), "b");
    auto logits = af::matmul(x, w) + b;
    prediction = af::argmax(logits, -1, "prediction");
    loss = af::reduce_sum((logits - y) * (logits - y));
  }
};

af::Tensor rows(int64_t n) {
  af::Tensor t(af::f32, {n, 3});
  for (int64_t i = 0; i < 3 * n; ++i) t.data<float>()[i] = static_cast<float>((i * 37) % 11) - 5.0f;
  return t;
}

}  // namespace

TEST_CASE("an exported model predicts what the session it came from did") {
  TempDir dir;
  Tiny m;
  auto sess = af::Session::create(m.g).value();
  REQUIRE(sess.run_init().ok());
  af::Tensor x = rows(2500);  // three of predict's 1000-row batches
  auto want = sess.run({m.prediction}, {{m.x, x}});
  REQUIRE(want.ok());

  const std::string out = (dir.path / "1").string();
  af::Status exported = af::export_model(sess, m.g, m.x, m.prediction, out);
  REQUIRE_MESSAGE(exported.ok(), exported.to_string());
  CHECK(fs::exists(out + "/model.afg"));
  CHECK(fs::exists(out + "/weights.safetensors"));
  CHECK(fs::exists(out + "/signature.txt"));

  auto served = af::ServedModel::load(out);
  REQUIRE_MESSAGE(served.ok(), served.status().to_string());
  // The pruned graph has no labels placeholder and no loss; both variables came along.
  CHECK(served->weights().size() == 2);
  CHECK(served->input().node().name == "x");
  CHECK(served->prediction().node().name == "prediction");
  auto got = served->predict(x);
  REQUIRE_MESSAGE(got.ok(), got.status().to_string());
  CHECK(got->shape() == (*want)[0].shape());
  CHECK(got->equals((*want)[0]));
}

TEST_CASE("export and load report what is wrong instead of writing or loading half a model") {
  TempDir dir;
  Tiny m;
  auto sess = af::Session::create(m.g).value();
  REQUIRE(sess.run_init().ok());
  // The labels placeholder is not what the prediction reads.
  af::Status s = af::export_model(sess, m.g, m.y, m.prediction, (dir.path / "bad").string());
  CHECK(s.code() == af::Code::invalid_argument);

  CHECK_FALSE(af::ServedModel::load((dir.path / "missing").string()).ok());

  const std::string out = (dir.path / "1").string();
  REQUIRE(af::export_model(sess, m.g, m.x, m.prediction, out).ok());
  std::ofstream(out + "/signature.txt") << "input x\n";  // no output line
  auto loaded = af::ServedModel::load(out);
  REQUIRE_FALSE(loaded.ok());
  CHECK(loaded.status().code() == af::Code::data_loss);

  REQUIRE(af::export_model(sess, m.g, m.x, m.prediction, out).ok());
  auto served = af::ServedModel::load(out).value();
  CHECK(served.predict(af::Tensor(af::f32, {0, 3})).status().code() == af::Code::invalid_argument);
}
