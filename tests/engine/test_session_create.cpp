// The error rule at the front door: Session::create and SummaryWriter::create return a
// Result instead of throwing; both objects move, and a moved-from one is closed.
#include <doctest/doctest.h>
#include <unistd.h>

#include <actorflow/actorflow.h>

#include <filesystem>
#include <string>

namespace af = actorflow;

namespace {
bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }
}  // namespace

TEST_CASE("Session::create returns a session that runs, and moves") {
  af::Graph g;
  auto x = af::placeholder(g, af::f32, {2}, "x");
  auto y = x + x;
  auto created = af::Session::create(g);
  REQUIRE_MESSAGE(created.ok(), created.status().to_string());
  auto out = created->run({y}, {{x, af::Tensor::from_vector<float>({1, 2}, {2})}});
  REQUIRE(out.ok());
  CHECK((*out)[0].to_vector<float>() == std::vector<float>{2, 4});

  af::Session moved = std::move(*created);
  CHECK(&moved.graph() == &g);
  CHECK(moved.eval(y, {{x, af::Tensor::from_vector<float>({3, 4}, {2})}})->to_vector<float>() ==
        std::vector<float>{6, 8});
  auto stale = created->run({y}, {{x, af::Tensor::from_vector<float>({1, 2}, {2})}});
  REQUIRE_FALSE(stale.ok());
  CHECK(contains(stale.status().message(), "closed"));

  // Move assignment closes the session it replaces and takes over the other one.
  auto second = af::Session::create(g).value();
  second = std::move(moved);
  CHECK(second.eval(y, {{x, af::Tensor::from_vector<float>({5, 6}, {2})}})->to_vector<float>() ==
        std::vector<float>{10, 12});
}

TEST_CASE("Session::create reports a backend that is not linked in, without throwing") {
  af::Graph g;
  (void)af::constant(g, 1.0f);
  af::Result<af::Session> remote = af::Session::create(g, "af://127.0.0.1:1");
  // The target overload reaches the remote backend; nothing listens on port 1.
  CHECK_FALSE(remote.ok());
  af::SessionOptions odd;
  odd.executor = "no-such-executor";
  auto r = af::Session::create(g, odd);
  REQUIRE_FALSE(r.ok());
  CHECK(contains(r.status().message(), "no-such-executor"));
  // Reaching into a failed Result is the one way to turn it into an exception.
  CHECK_THROWS_AS((void)r.value(), af::Error);
}

TEST_CASE("SummaryWriter::create reports an unwritable directory; writers move") {
  auto bad = af::SummaryWriter::create("/proc/self/no/such/dir");
  REQUIRE_FALSE(bad.ok());
  CHECK(contains(bad.status().message(), "/proc/self/no/such/dir"));

  const auto dir = std::filesystem::temp_directory_path() / ("af_writer_move_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  auto created = af::SummaryWriter::create(dir.string());
  REQUIRE_MESSAGE(created.ok(), created.status().to_string());
  const std::string path = created->path();
  CHECK(std::filesystem::exists(path));
  af::SummaryWriter w = std::move(*created);
  CHECK(w.path() == path);
  CHECK(w.add_scalar("loss", 1.5f, 1).ok());
  CHECK(w.close().ok());
  CHECK(std::filesystem::file_size(path) > 0);
  auto stale = created->add_scalar("loss", 2.0f, 2);
  REQUIRE_FALSE(stale.ok());
  CHECK(contains(stale.message(), "moved"));
  CHECK(created->path().empty());
  std::filesystem::remove_all(dir);
}
