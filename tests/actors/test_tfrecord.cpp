// One TFRecord framing and one protobuf writer: the data readers' record files and the
// event files go through the same code, so a file written by either reads with both.
#include <doctest/doctest.h>

#include <actorflow/actorflow.h>
#include <actorflow/data/readers.h>
#include <actorflow/protobuf_wire.h>
#include <actorflow/summary.h>
#include <actorflow/tfrecord.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace af = actorflow;
namespace ad = actorflow::data;
namespace fs = std::filesystem;
namespace tfr = actorflow::tfrecord;

namespace {

std::string tmp(const std::string& name) {
  auto dir = fs::temp_directory_path() / "af_test_tfrecord";
  fs::create_directories(dir);
  return (dir / name).string();
}

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace

TEST_CASE("tfrecord: RecordWriter's bytes are the shared framing's, and the event reader reads them") {
  std::string path = tmp("three.rec");
  {
    auto w = ad::RecordWriter::open(path);
    REQUIRE(w.ok());
    for (const char* r : {"a", "", "hello world"}) REQUIRE((*w)->write(r).ok());
    REQUIRE((*w)->close().ok());
  }
  CHECK(slurp(path) == tfr::frame_record("a") + tfr::frame_record("") + tfr::frame_record("hello world"));
  auto records = af::read_tfrecords(path);
  REQUIRE_MESSAGE(records.ok(), records.status().to_string());
  CHECK(*records == std::vector<std::string>{"a", "", "hello world"});
}

TEST_CASE("tfrecord: both readers name the same problem, record and byte offset") {
  std::string good = tfr::frame_record("first") + tfr::frame_record("second");
  std::string bad = good;
  bad[good.size() - 6] ^= 0x40;  // inside the second record's data
  std::string path = tmp("bad.rec");
  std::ofstream(path, std::ios::binary) << bad;
  size_t second = tfr::frame_record("first").size();
  std::string where = "record 1 at byte offset " + std::to_string(second) + ": the data fails its CRC-32C check";

  auto reader = ad::RecordReader::open(path);
  REQUIRE(reader.ok());
  std::string rec;
  REQUIRE(*(*reader)->next(&rec));
  CHECK(rec == "first");
  auto failed = (*reader)->next(&rec);
  REQUIRE_FALSE(failed.ok());
  CHECK(failed.status().message() == "record file '" + path + "': " + where);

  auto events = af::read_tfrecords(path);
  REQUIRE_FALSE(events.ok());
  CHECK(events.status().message().find(where) != std::string::npos);

  tfr::RecordAt at = tfr::record_at(bad, second);
  CHECK(at.problem == tfr::RecordAt::Problem::data_crc);
  CHECK(tfr::header_intact(bad, second));
  CHECK_FALSE(tfr::header_intact(bad, 1));
}

TEST_CASE("protobuf wire: the Example codec writes with the shared writer and reads unpacked lists too") {
  ad::Example e;
  e["f"].floats = {1.5f, -2};
  e["i"].kind = ad::Feature::Kind::ints;
  e["i"].ints = {-1, 300};
  std::string bytes = ad::encode_example(e);
  // Example{features: Features{feature: {key "f", value: Feature{float_list: {value: packed}}}}}
  std::vector<af::pb::Field> top;
  REQUIRE(af::pb::parse_fields(bytes, &top));
  REQUIRE(top.size() == 1);
  CHECK(top[0].number == 1);

  // The same Example with its lists unpacked, as some writers emit them.
  af::pb::Writer floats, ints;
  floats.float_field(1, 1.5f);
  floats.float_field(1, -2);
  ints.int_field(1, -1);
  ints.int_field(1, 300);
  auto entry = [](const std::string& key, int list_field, const std::string& list) {
    af::pb::Writer feature, kv;
    feature.bytes_field(list_field, list);
    kv.bytes_field(1, key);
    kv.bytes_field(2, feature.bytes());
    return kv.take();
  };
  af::pb::Writer features, example;
  features.bytes_field(1, entry("f", 2, floats.bytes()));
  features.bytes_field(1, entry("i", 3, ints.bytes()));
  example.bytes_field(1, features.bytes());
  auto back = ad::decode_example(example.bytes());
  REQUIRE_MESSAGE(back.ok(), back.status().to_string());
  CHECK((*back)["f"].floats == std::vector<float>{1.5f, -2});
  CHECK((*back)["i"].kind == ad::Feature::Kind::ints);
  CHECK((*back)["i"].ints == std::vector<int64_t>{-1, 300});
  auto packed = ad::decode_example(bytes);
  REQUIRE(packed.ok());
  CHECK((*packed)["f"].floats == (*back)["f"].floats);
  CHECK((*packed)["i"].ints == (*back)["i"].ints);

  std::vector<uint64_t> varints;
  CHECK_FALSE(af::pb::parse_packed_varints(std::string("\x80", 1), &varints));
  std::vector<float> fl;
  CHECK_FALSE(af::pb::parse_packed_floats("abc", &fl));
}
