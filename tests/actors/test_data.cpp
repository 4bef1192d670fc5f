// Input data: file formats, record files, and the actor pipeline's ordering, determinism
// and exactly-once delivery.
#include <doctest/doctest.h>
#include <zlib.h>

#include <actorflow/actorflow.h>
#include <actorflow/data/dataset.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>

#include "interop/skip.h"

namespace af = actorflow;
namespace ad = actorflow::data;
namespace fs = std::filesystem;

namespace {

std::string tmp(const std::string& name) {
  auto dir = fs::temp_directory_path() / "af_test_data";
  fs::create_directories(dir);
  return (dir / name).string();
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f << bytes;
}

std::string idx_bytes() {
  std::string b{'\0', '\0', '\x08', '\x03', 0, 0, 0, 2, 0, 0, 0, 2, 0, 0, 0, 3};
  for (int i = 0; i < 12; ++i) b += static_cast<char>(i * 10);
  return b;
}

void write_gzip(const std::string& path, const std::string& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
  gzclose(f);
}

std::vector<int64_t> drain_ids(ad::Iterator& it, int component = 0) {
  std::vector<int64_t> ids;
  ad::Components c;
  while (true) {
    auto more = it.next(&c);
    REQUIRE_MESSAGE(more.ok(), more.status().to_string());
    if (!*more) break;
    for (int64_t i = 0; i < c[static_cast<size_t>(component)].num_elements(); ++i)
      ids.push_back(c[static_cast<size_t>(component)].data<int64_t>()[i]);
  }
  return ids;
}

af::Tensor iota(int64_t n) {
  af::Tensor t(af::i64, {n});
  for (int64_t i = 0; i < n; ++i) t.data<int64_t>()[i] = i;
  return t;
}

}  // namespace

TEST_CASE("IDX files, raw and gzip; truncation and bad magic are named") {
  write_file(tmp("a.idx"), idx_bytes());
  write_gzip(tmp("a.idx.gz"), idx_bytes());
  for (auto path : {tmp("a.idx"), tmp("a.idx.gz")}) {
    auto t = ad::read_idx(path);
    REQUIRE_MESSAGE(t.ok(), t.status().to_string());
    CHECK(t->shape() == af::Shape{2, 2, 3});
    CHECK(t->dtype() == af::u8);
    CHECK(t->data<uint8_t>()[11] == 110);
  }
  std::string gz;
  {
    std::ifstream f(tmp("a.idx.gz"), std::ios::binary);
    gz.assign(std::istreambuf_iterator<char>(f), {});
  }
  write_file(tmp("trunc.idx.gz"), gz.substr(0, gz.size() / 2));
  auto bad = ad::read_idx(tmp("trunc.idx.gz"));
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message().find("trunc.idx.gz") != std::string::npos);
  write_file(tmp("short.idx"), idx_bytes().substr(0, 20));
  auto shortf = ad::read_idx(tmp("short.idx"));
  REQUIRE_FALSE(shortf.ok());
  CHECK(shortf.status().message().find("short.idx") != std::string::npos);
  write_file(tmp("magic.idx"), "PK\x03\x04 not idx");
  CHECK_FALSE(ad::read_idx(tmp("magic.idx")).ok());
  CHECK(ad::read_idx(tmp("missing.idx")).status().code() == af::Code::not_found);
}

TEST_CASE("CSV: header, label by name, categorical columns, bad lines") {
  write_file(tmp("a.csv"), "x,color,y\n1.5,red,0\n2,blue,1\n-3,red,1\n");
  ad::CsvOptions o;
  o.label_name = "y";
  o.categorical = {"color"};
  auto d = ad::read_csv(tmp("a.csv"), o);
  REQUIRE_MESSAGE(d.ok(), d.status().to_string());
  CHECK(d->features.shape() == af::Shape{3, 2});
  CHECK(d->features.to_vector<float>() == std::vector<float>{1.5f, 0, 2, 1, -3, 0});
  CHECK(d->labels.to_vector<int64_t>() == std::vector<int64_t>{0, 1, 1});  // integer labels stay int64
  CHECK(d->vocabularies["color"] == std::vector<std::string>{"red", "blue"});
  write_file(tmp("bad.csv"), "x,y\n1,2\n3,oops\n4,5\n");
  ad::CsvOptions o2;
  o2.label_index = 1;
  auto bad = ad::read_csv(tmp("bad.csv"), o2);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message().find("line 3") != std::string::npos);
  CHECK(bad.status().message().find("bad.csv") != std::string::npos);
  o2.skip_bad_lines = true;
  auto skipped = ad::read_csv(tmp("bad.csv"), o2);
  REQUIRE(skipped.ok());
  CHECK(skipped->features.dim(0) == 2);
  CHECK(skipped->skipped_lines == std::vector<int64_t>{3});
}

TEST_CASE("libsvm: sparse rows, dense view, errors with line numbers") {
  write_file(tmp("a.svm"), "1 1:0.5 3:2\n0 2:1  # comment\n-1\n");
  auto d = ad::read_libsvm(tmp("a.svm"));
  REQUIRE_MESSAGE(d.ok(), d.status().to_string());
  CHECK(d->labels.to_vector<float>() == std::vector<float>{1, 0, -1});
  CHECK(d->num_features == 3);
  CHECK(d->dense().to_vector<float>() == std::vector<float>{0.5f, 0, 2, 0, 1, 0, 0, 0, 0});
  write_file(tmp("bad.svm"), "1 1:0.5\n1 0:3\n");
  auto bad = ad::read_libsvm(tmp("bad.svm"));
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message().find("line 2") != std::string::npos);
}

TEST_CASE("record files: round trip, a corrupted record is reported with its offset, or skipped") {
  std::string path = tmp("a.rec");
  {
    auto w = ad::RecordWriter::open(path);
    REQUIRE(w.ok());
    for (int i = 0; i < 10; ++i) REQUIRE((*w)->write("record-" + std::to_string(i) + std::string(static_cast<size_t>(i), 'x')).ok());
    REQUIRE((*w)->close().ok());
  }
  auto read_all = [&](const std::string& p, ad::RecordReaderOptions o, std::vector<std::string>* out) -> af::Status {
    auto r = ad::RecordReader::open(p, o);
    if (!r.ok()) return r.status();
    std::string rec;
    while (true) {
      auto more = (*r)->next(&rec);
      if (!more.ok()) return more.status();
      if (!*more) return af::Status::OK();
      out->push_back(rec);
    }
  };
  std::vector<std::string> recs;
  REQUIRE(read_all(path, {}, &recs).ok());
  REQUIRE(recs.size() == 10);
  CHECK(recs[3] == "record-3xxx");
  // Flip a byte inside record 3's payload.
  std::string bytes;
  {
    std::ifstream f(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(f), {});
  }
  size_t off3 = 0;
  for (int i = 0; i < 3; ++i) off3 += 16 + std::string("record-" + std::to_string(i)).size() + static_cast<size_t>(i);
  bytes[off3 + 12 + 2] ^= 0x40;
  write_file(tmp("bad.rec"), bytes);
  std::vector<std::string> partial;
  af::Status st = read_all(tmp("bad.rec"), {}, &partial);
  REQUIRE_FALSE(st.ok());
  CHECK(st.message().find("bad.rec") != std::string::npos);
  CHECK(st.message().find("offset " + std::to_string(off3)) != std::string::npos);
  CHECK(partial.size() == 3);
  std::vector<std::string> skipped;
  ad::RecordReaderOptions skip;
  skip.skip_corrupted = true;
  REQUIRE(read_all(tmp("bad.rec"), skip, &skipped).ok());
  CHECK(skipped.size() == 9);
  CHECK(skipped[3] == "record-4xxxx");
}

TEST_CASE("tf.train.Example round trip and CSV -> records converter") {
  ad::Example e;
  e["label"].floats = {1.0f};
  e["ids"].kind = ad::Feature::Kind::ints;
  e["ids"].ints = {3, -1, 1LL << 40};
  e["name"].kind = ad::Feature::Kind::bytes;
  e["name"].bytes = {"abc", ""};
  auto back = ad::decode_example(ad::encode_example(e));
  REQUIRE(back.ok());
  CHECK((*back)["ids"].ints == std::vector<int64_t>{3, -1, 1LL << 40});
  CHECK((*back)["name"].bytes == std::vector<std::string>{"abc", ""});
  CHECK((*back)["label"].floats == std::vector<float>{1.0f});
  CHECK_FALSE(ad::decode_example("\x0a\x05\x0a").ok());

  write_file(tmp("c.csv"), "a,b,label\n1,2,0\n3,4,1\n");
  ad::CsvOptions o;
  o.label_name = "label";
  REQUIRE(ad::convert_csv_to_records(tmp("c.csv"), tmp("c.rec"), o).ok());
  auto r = ad::RecordReader::open(tmp("c.rec"));
  REQUIRE(r.ok());
  std::string rec;
  REQUIRE(*(*r)->next(&rec));
  REQUIRE(*(*r)->next(&rec));
  auto ex = ad::decode_example(rec);
  REQUIRE(ex.ok());
  CHECK((*ex)["features"].floats == std::vector<float>{3, 4});
  CHECK((*ex)["label"].floats == std::vector<float>{1});
}

TEST_CASE("pipeline: shuffle + batch deliver every example exactly once per epoch, deterministically") {
  auto ds = ad::Dataset::from_tensors({iota(1000)}).shuffle(100, 42).batch(32);
  auto a = drain_ids(*ds.make_iterator());
  auto b = drain_ids(*ds.make_iterator());
  CHECK(a == b);
  REQUIRE(a.size() == 1000);
  std::set<int64_t> seen(a.begin(), a.end());
  CHECK(seen.size() == 1000);
  std::vector<int64_t> sorted = a;
  std::sort(sorted.begin(), sorted.end());
  CHECK(sorted != a);  // actually shuffled
  auto c = drain_ids(*ad::Dataset::from_tensors({iota(1000)}).shuffle(100, 7).batch(32).make_iterator());
  CHECK(c != a);
}

TEST_CASE("pipeline: batches, remainder, repeat epochs, map on threads keeps order") {
  int batches = 0, last = 0;
  {
    auto it = ad::Dataset::from_tensors({iota(100)}).batch(32).make_iterator();
    ad::Components c;
    while (*it->next(&c)) {
      ++batches;
      last = static_cast<int>(c[0].dim(0));
    }
  }
  CHECK(batches == 4);
  CHECK(last == 4);
  auto dropped = drain_ids(*ad::Dataset::from_tensors({iota(100)}).batch(32, true).make_iterator());
  CHECK(dropped.size() == 96);
  // Shuffle before repeat: each epoch is a full permutation of its own.
  auto rep = drain_ids(*ad::Dataset::from_tensors({iota(300)}).shuffle(1000, 3).repeat(3).batch(50).make_iterator());
  REQUIRE(rep.size() == 900);
  for (int e = 0; e < 3; ++e) {
    std::set<int64_t> epoch(rep.begin() + e * 300, rep.begin() + (e + 1) * 300);
    CHECK(epoch.size() == 300);
  }
  auto doubled = ad::Dataset::from_tensors({iota(1000)})
                     .map([](const ad::Components& c) -> af::Result<ad::Components> {
                       af::Tensor t = c[0].clone();
                       for (int64_t i = 0; i < t.num_elements(); ++i) t.data<int64_t>()[i] *= 2;
                       return ad::Components{t};
                     }, 2)
                     .batch(64)
                     .prefetch(4);
  auto ids = drain_ids(*doubled.make_iterator());
  REQUIRE(ids.size() == 1000);
  for (int64_t i = 0; i < 1000; ++i) CHECK(ids[static_cast<size_t>(i)] == 2 * i);
}

TEST_CASE("pipeline: records parsed by map; a corrupted record stops the iterator with its offset") {
  std::string path = tmp("p.rec");
  {
    auto w = ad::RecordWriter::open(path);
    for (int i = 0; i < 600; ++i) {
      ad::Example e;
      e["id"].kind = ad::Feature::Kind::ints;
      e["id"].ints = {i};
      REQUIRE((*w)->write(ad::encode_example(e)).ok());
    }
    REQUIRE((*w)->close().ok());
  }
  auto parse = [](const ad::Components& c) -> af::Result<ad::Components> {
    af::Tensor ids(af::i64, {c[0].num_elements()});
    for (int64_t i = 0; i < c[0].num_elements(); ++i) {
      auto ex = ad::decode_example(c[0].data<std::string>()[i]);
      if (!ex.ok()) return ex.status();
      ids.data<int64_t>()[i] = (*ex)["id"].ints.at(0);
    }
    return ad::Components{ids};
  };
  auto ids = drain_ids(*ad::Dataset::from_records({path}).map(parse, 2).batch(100).make_iterator());
  REQUIRE(ids.size() == 600);
  CHECK(ids[599] == 599);
  std::string bytes;
  {
    std::ifstream f(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(f), {});
  }
  bytes[bytes.size() / 2] ^= 0x11;
  write_file(tmp("pbad.rec"), bytes);
  auto it = ad::Dataset::from_records({tmp("pbad.rec")}).map(parse).batch(100).make_iterator();
  ad::Components c;
  af::Status err;
  while (true) {
    auto more = it->next(&c);
    if (!more.ok()) {
      err = more.status();
      break;
    }
    if (!*more) break;
  }
  REQUIRE_FALSE(err.ok());
  CHECK(err.message().find("pbad.rec") != std::string::npos);
  CHECK(err.message().find("offset") != std::string::npos);
}

TEST_CASE("needs dataset-fashion-mnist: Fashion-MNIST from Debian's package") {
  std::string dir = "/usr/share/datasets/fashion-mnist/";
  if (!fs::exists(dir + "t10k-labels-idx1-ubyte.gz"))
    aft::skip("Fashion-MNIST test skipped: dataset-fashion-mnist is not installed (" + dir + ")");
  auto images = ad::read_idx(dir + "t10k-images-idx3-ubyte.gz");
  auto labels = ad::read_idx(dir + "t10k-labels-idx1-ubyte.gz");
  REQUIRE(images.ok());
  REQUIRE(labels.ok());
  CHECK(images->shape() == af::Shape{10000, 28, 28});
  CHECK(labels->shape() == af::Shape{10000});
  int hist[10] = {};
  for (int64_t i = 0; i < 10000; ++i) hist[labels->data<uint8_t>()[i]]++;
  for (int k = 0; k < 10; ++k) CHECK(hist[k] == 1000);
}

// tests/data/examples.tfrecord was written by TensorFlow's tf.io.TFRecordWriter
// (tests/data/make_golden.py): our reader checks TF's framing and CRCs, and our codec
// decodes TF's serialization of tf.train.Example.
TEST_CASE("golden TFRecord file written by TensorFlow: records and tf.train.Examples") {
  auto r = ad::RecordReader::open(std::string(AF_TEST_DATA_DIR) + "/examples.tfrecord");
  REQUIRE_MESSAGE(r.ok(), r.status().to_string());
  std::vector<ad::Example> examples;
  std::string rec;
  while (true) {
    auto more = (*r)->next(&rec);
    REQUIRE_MESSAGE(more.ok(), more.status().to_string());
    if (!*more) break;
    auto ex = ad::decode_example(rec);
    REQUIRE_MESSAGE(ex.ok(), ex.status().to_string());
    examples.push_back(std::move(*ex));
  }
  REQUIRE(examples.size() == 3);
  using Kind = ad::Feature::Kind;
  for (size_t i = 0; i < examples.size(); ++i) {
    CAPTURE(i);
    auto& e = examples[i];
    CHECK(e.size() == 4);
    CHECK(e["id"].kind == Kind::ints);
    CHECK(e["id"].ints == std::vector<int64_t>{static_cast<int64_t>(i)});
    CHECK(e["ints"].kind == Kind::ints);
    CHECK(e["floats"].kind == Kind::floats);
    CHECK(e["name"].kind == Kind::bytes);
  }
  CHECK(examples[0]["ints"].ints == std::vector<int64_t>{-1, 0, 1, int64_t{1} << 40, std::numeric_limits<int64_t>::min()});
  CHECK(examples[0]["floats"].floats == std::vector<float>{0.5f, -1.25f, 3.0e-5f, 1e30f});
  CHECK(examples[0]["name"].bytes == std::vector<std::string>{"alpha"});
  CHECK(examples[1]["ints"].ints.empty());
  CHECK(examples[1]["floats"].floats == std::vector<float>{2.0f});
  CHECK(examples[1]["name"].bytes ==
        std::vector<std::string>{"", std::string("\0\xff" "binary", 8), "caf\xc3\xa9"});
  CHECK(examples[2]["ints"].ints == std::vector<int64_t>(20, 7));
  std::vector<float> quarters;
  for (int i = 0; i < 12; ++i) quarters.push_back(static_cast<float>(i) / 4);
  CHECK(examples[2]["floats"].floats == quarters);
  CHECK(examples[2]["name"].bytes == std::vector<std::string>{"gamma"});
}
