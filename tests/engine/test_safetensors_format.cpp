// The checkpoint file format: what write_safetensors refuses, damaged files that must
// never crash the reader, the strict JSON of headers and the index, and corrupt headers
// or indexes named in their errors.
#include "saver_test_util.h"

TEST_CASE("write_safetensors rejects what it cannot store") {
  TempDir dir;
  auto t = af::Tensor::from_vector<float>({1, 2});
  CHECK(af::write_safetensors(dir / "a", {{"x", t}, {"x", t}}).code() == af::Code::invalid_argument);
  CHECK(af::write_safetensors(dir / "a", {{"__metadata__", t}}).code() == af::Code::invalid_argument);
  CHECK(af::write_safetensors(dir / "a", {{"s", af::Tensor::scalar("hi")}}).code() == af::Code::unimplemented);
  CHECK(af::write_safetensors(dir / "a", {{"x", t}}, {{"crc32c.data", "0"}}).code() == af::Code::invalid_argument);
  REQUIRE(af::write_safetensors(dir / "a", {{"weird \"name\"\n\\", t}}, {{"note", "caf\xc3\xa9"}}).ok());
  std::map<std::string, std::string> meta;
  auto back = af::read_safetensors(dir / "a", &meta);
  REQUIRE(back.ok());
  CHECK((*back)[0].name == "weird \"name\"\n\\");
  CHECK((*back)[0].value.equals(t));
  CHECK(meta["note"] == "caf\xc3\xa9");
}

TEST_CASE("damaged checkpoints never crash the reader: they fail or read back identical") {
  TempDir dir;
  const std::string path = save_model(dir.str(), 1);
  const std::string original = read_file(path);
  auto clean = af::read_safetensors(path);
  REQUIRE(clean.ok());
  std::mt19937 rng(99);
  int failed = 0;
  for (int trial = 0; trial < 300; ++trial) {
    std::string bad = original;
    int edits = 1 + static_cast<int>(rng() % 3);
    for (int k = 0; k < edits; ++k) {
      size_t at = rng() % bad.size();
      bad[at] = static_cast<char>(rng() % 256);
    }
    if (trial % 10 == 0) bad.resize(rng() % bad.size());
    write_file(path, bad);
    auto r = af::read_safetensors(path);
    if (!r.ok()) {
      ++failed;
      CHECK(r.status().code() == af::Code::data_loss);
      continue;
    }
    // Accepted only when nothing that matters changed (e.g. a space in the header's padding).
    REQUIRE(r->size() == clean->size());
    for (size_t i = 0; i < r->size(); ++i) {
      CHECK((*r)[i].name == (*clean)[i].name);
      CHECK((*r)[i].value.equals((*clean)[i].value));
    }
  }
  CHECK(failed > 250);
}

TEST_CASE("strict JSON for headers and the index: escapes, surrogate pairs, duplicate keys, depth") {
  auto v = af::st::parse_json("{\"a\\u00e9\\ud83d\\ude00\\n\": [1, 22], \"b\": {\"c\": true, \"d\": null}}");
  REQUIRE(v.ok());
  REQUIRE(v->size() == 2);
  const std::string key = "a\xc3\xa9\xf0\x9f\x98\x80\n";
  REQUIRE(v->contains(key));
  uint64_t x = 0;
  CHECK(af::st::json_index((*v)[key][1], &x));
  CHECK(x == 22);
  CHECK((*v)["b"]["c"].get<bool>());
  for (const char* not_index : {"-1", "1.5", "9223372036854775808", "\"7\""}) {
    CAPTURE(not_index);
    auto n = af::st::parse_json(not_index);
    REQUIRE(n.ok());
    CHECK_FALSE(af::st::json_index(*n, &x));
  }
  for (const char* bad : {"{", "{\"a\" 1}", "[1,]", "\"\\ud800\"", "\"tab\there\"", "{} x", "\"\xff\""}) {
    CAPTURE(bad);
    auto r = af::st::parse_json(bad);
    CHECK_FALSE(r.ok());
    CHECK(contains(r.status().message(), "line 1"));  // the library's position, not its exception id
    CHECK_FALSE(contains(r.status().message(), "json.exception"));
  }
  // A damaged file's token can be huge and binary; the message quotes a short, printable tail.
  auto huge = af::st::parse_json("{\"a\": \"" + std::string(100000, 'x') + "\x01\xff tail\"}");
  REQUIRE_FALSE(huge.ok());
  CHECK(huge.status().message().size() < 400);
  CHECK(contains(huge.status().message(), "line 1, column 100008"));
  auto dup = af::st::parse_json("{\"a\": {\"k\": 1}, \"b\": {\"k\": 2}, \"a\": 3}");
  CHECK_FALSE(dup.ok());
  CHECK(contains(dup.status().message(), "key \"a\" appears twice"));
  CHECK(af::st::parse_json("[{\"k\": 1}, {\"k\": 2}]").ok());  // the same key in sibling objects is fine
  const int limit = af::st::kMaxJsonDepth;
  CHECK(af::st::parse_json(std::string(limit, '[') + std::string(limit, ']')).ok());
  auto deep = af::st::parse_json(std::string(limit + 1, '[') + std::string(limit + 1, ']'));
  CHECK_FALSE(deep.ok());
  CHECK(contains(deep.status().message(), "nested deeper than"));
}

namespace {
// Writes a safetensors file whose header is `header` verbatim, followed by `data`.
void write_raw_safetensors(const std::string& path, const std::string& header, const std::string& data) {
  std::string len(8, '\0');
  for (int i = 0; i < 8; ++i) len[static_cast<size_t>(i)] = static_cast<char>(header.size() >> (8 * i));
  write_file(path, len + header + data);
}
}  // namespace

TEST_CASE("a corrupt safetensors header or checkpoint index is an error that names the file") {
  TempDir dir;
  const std::string file = dir / "model.ckpt-1.safetensors";
  const std::string entry = "{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}";

  write_raw_safetensors(file, "{\"x\":" + entry.substr(0, 20), "");
  auto r = af::read_safetensors(file);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == af::Code::data_loss);
  CHECK(contains(r.status().message(), "'" + file + "'"));
  CHECK(contains(r.status().message(), "header is not valid JSON (parse error at line 1, column"));

  write_raw_safetensors(file, "{\"x\":" + entry + ",\"x\":" + entry + "}", std::string(4, '\0'));
  r = af::read_safetensors(file);
  REQUIRE_FALSE(r.ok());
  CHECK(contains(r.status().message(), "'" + file + "'"));
  CHECK(contains(r.status().message(), "key \"x\" appears twice"));

  write_raw_safetensors(file, "{\"x\":" + entry + "}", std::string(4, '\0'));  // control: the same file, well formed
  CHECK(af::read_safetensors(file).ok());
  // JSON holds only UTF-8, so a name that is not cannot be written.
  CHECK(af::write_safetensors(dir / "bad.safetensors", {{"x\xff", af::Tensor::from_vector<float>({1})}}).code() ==
        af::Code::invalid_argument);

  const std::string index = dir / "checkpoint";
  write_file(index, "{\"latest\": \"model.ckpt-1.safetensors\", \"all\": [");
  auto s = af::read_checkpoint_state(dir.str());
  REQUIRE_FALSE(s.ok());
  CHECK(s.status().code() == af::Code::data_loss);
  CHECK(contains(s.status().message(), "checkpoint index '" + index + "' is corrupted: not valid JSON"));
  write_file(index, "{\"latest\": \"model.ckpt-1.safetensors\", \"all\": [7]}");
  s = af::read_checkpoint_state(dir.str());
  REQUIRE_FALSE(s.ok());
  CHECK(contains(s.status().message(), "'" + index + "'"));
  CHECK(contains(s.status().message(), "\"all\" holds number"));
  write_file(index, "{\"latest\": \"model.ckpt-1.safetensors\", \"all\": []}");
  auto latest = af::latest_checkpoint(dir.str());
  REQUIRE(latest.ok());
  CHECK(*latest == file);
}

// A child process saves in a loop (the same write_checkpoint Saver::save ends in) while the
// parent SIGKILLs it at random moments; every time, the directory must restore to a
// complete checkpoint. The child touches no session or allocator: only the calling thread
// survives fork, so it works on tensors made before the fork.
