// The CSV reader loses no data silently: sklearn's summary line, headers made of numbers,
// label columns and their dtype.
#include <doctest/doctest.h>

#include <actorflow/actorflow.h>
#include <actorflow/data/readers.h>

#include <filesystem>
#include <fstream>

namespace af = actorflow;
namespace ad = actorflow::data;
namespace fs = std::filesystem;

namespace {

const char* kSklearnData = "/usr/lib/python3/dist-packages/sklearn/datasets/data/";

std::string tmp(const std::string& name, const std::string& text) {
  auto dir = fs::temp_directory_path() / "af_test_csv";
  fs::create_directories(dir);
  std::string path = (dir / name).string();
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

// The first rows of sklearn's iris.csv, with its summary line.
const char* kIrisHead =
    "4,4,setosa,versicolor,virginica\n"
    "5.1,3.5,1.4,0.2,0\n"
    "4.9,3.0,1.4,0.2,0\n"
    "7.0,3.2,4.7,1.4,1\n"
    "6.3,3.3,6.0,2.5,2\n";

void check_iris_head(const ad::CsvData& d) {
  CHECK(d.features.shape() == af::Shape{4, 4});
  CHECK(d.features.data<float>()[0] == doctest::Approx(5.1));  // the first flower is data
  REQUIRE(d.labels.valid());
  CHECK(d.labels.dtype() == af::i64);
  CHECK(d.labels.to_vector<int64_t>() == std::vector<int64_t>{0, 0, 1, 2});
  CHECK(d.class_names == std::vector<std::string>{"setosa", "versicolor", "virginica"});
}

}  // namespace

TEST_CASE("CSV: sklearn's summary line is recognised with default options") {
  auto d = ad::read_csv(tmp("iris_head.csv", kIrisHead));
  REQUIRE_MESSAGE(d.ok(), d.status().to_string());
  check_iris_head(*d);
}

TEST_CASE("CSV: header=true with skip_lines=1 on an sklearn file keeps the first flower") {
  ad::CsvOptions o;
  o.skip_lines = 1;
  o.header = true;
  auto d = ad::read_csv(tmp("iris_skip.csv", kIrisHead), o);
  REQUIRE_MESSAGE(d.ok(), d.status().to_string());
  check_iris_head(*d);
}

TEST_CASE("CSV: sklearn's iris.csv as installed: 150 rows, 4 features, int64 classes") {
  std::string iris = std::string(kSklearnData) + "iris.csv";
  if (!fs::exists(iris)) {
    MESSAGE("python3-sklearn is not installed: " << iris);
    return;
  }
  for (int skip : {0, 1}) {
    ad::CsvOptions o;
    o.skip_lines = skip;
    auto d = ad::read_csv(iris, o);
    REQUIRE_MESSAGE(d.ok(), d.status().to_string());
    CHECK(d->features.shape() == af::Shape{150, 4});
    CHECK(d->labels.dtype() == af::i64);
    CHECK(d->labels.to_vector<int64_t>()[149] == 2);
  }
}

TEST_CASE("CSV: boston's summary line followed by a quoted header; float targets stay float32") {
  auto d = ad::read_csv(tmp("boston.csv", "2,2,,\n\"A\",\"B\",\"MEDV\"\n1,2,24\n3,4,21.6\n"));
  REQUIRE_MESSAGE(d.ok(), d.status().to_string());
  CHECK(d->columns == std::vector<std::string>{"A", "B"});
  CHECK(d->features.shape() == af::Shape{2, 2});
  CHECK(d->labels.dtype() == af::f32);
  CHECK(d->labels.to_vector<float>() == std::vector<float>{24.0f, 21.6f});
}

TEST_CASE("CSV: a summary line whose row count is off is an error naming line 1") {
  ad::CsvOptions o;
  o.skip_lines = 2;  // drops the first flower as well as the summary
  o.header = false;
  auto d = ad::read_csv(tmp("iris_lost.csv", kIrisHead), o);
  REQUIRE_FALSE(d.ok());
  CHECK(d.status().message().find("line 1") != std::string::npos);
  CHECK(d.status().message().find("promises 4 rows") != std::string::npos);
}

TEST_CASE("CSV: a header row made only of numbers is an error naming its line") {
  auto path = tmp("numbers.csv", "# a comment line\n1,2,3\n4,5,6\n");
  ad::CsvOptions o;
  o.skip_lines = 1;
  auto d = ad::read_csv(path, o);
  REQUIRE_FALSE(d.ok());
  CHECK(d.status().message().find("numbers.csv' line 2") != std::string::npos);
  CHECK(d.status().message().find("header=false") != std::string::npos);
  o.header = false;
  auto ok = ad::read_csv(path, o);
  REQUIRE_MESSAGE(ok.ok(), ok.status().to_string());
  CHECK(ok->features.shape() == af::Shape{2, 3});
  CHECK_FALSE(ok->labels.valid());  // a plain CSV has no label unless one is named
}

TEST_CASE("CSV: integer labels stay int64, fractional ones are float32, categorical ones are ids") {
  ad::CsvOptions o;
  o.label_name = "y";
  auto ints = ad::read_csv(tmp("ints.csv", "x,y\n1.5,3\n2,-7\n"), o);
  REQUIRE(ints.ok());
  CHECK(ints->labels.dtype() == af::i64);
  CHECK(ints->labels.to_vector<int64_t>() == std::vector<int64_t>{3, -7});
  auto floats = ad::read_csv(tmp("floats.csv", "x,y\n1.5,3\n2,0.5\n"), o);
  REQUIRE(floats.ok());
  CHECK(floats->labels.dtype() == af::f32);
  CHECK(floats->labels.to_vector<float>() == std::vector<float>{3.0f, 0.5f});
  o.categorical = {"y"};
  auto cats = ad::read_csv(tmp("cats.csv", "x,y\n1,cat\n2,dog\n3,cat\n"), o);
  REQUIRE(cats.ok());
  CHECK(cats->labels.dtype() == af::i64);
  CHECK(cats->labels.to_vector<int64_t>() == std::vector<int64_t>{0, 1, 0});
  ad::CsvOptions none;
  none.label_index = ad::kNoLabel;
  auto all = ad::read_csv(tmp("iris_nolabel.csv", kIrisHead), none);
  REQUIRE(all.ok());
  CHECK(all->features.shape() == af::Shape{4, 5});  // asked for: the class is a feature
}
