// The daemon wire's frames: header, incremental reader, messages, and 10,000 mutated
// frames that must give errors, never crashes.
#include <doctest/doctest.h>

#include <actorflow/actorflow.h>
#include <actorflow/crc32c.h>
#include <actorflow/tensor_codec.h>

#include <random>
#include <string>

#include "../net/src/frame.h"
#include "../net/src/frame_messages.h"

namespace af = actorflow;
namespace an = actorflow::net;

namespace {

// Feeds `bytes` to a reader in pieces of `chunk` bytes; returns the frames or the error.
af::Result<std::vector<an::RawFrame>> read_all(const std::string& bytes, size_t chunk, uint64_t max_body) {
  an::FrameReader reader(max_body);
  std::vector<an::RawFrame> frames;
  size_t pos = 0;
  while (pos < bytes.size()) {
    size_t n = std::min(chunk, bytes.size() - pos);
    while (n > 0) {
      std::optional<an::RawFrame> f;
      auto used = reader.consume(bytes.data() + pos, n, &f);
      if (!used.ok()) return used.status();
      pos += *used;
      n -= *used;
      if (f) frames.push_back(std::move(*f));
    }
  }
  if (!reader.idle()) return af::data_loss("truncated: " + std::to_string(reader.wanted()) + " bytes missing");
  return frames;
}

an::RunStepMsg sample_step() {
  an::RunStepMsg m;
  m.handle = 7;
  m.step_id = 42;
  af::TensorMessage tm;
  tm.tensor = af::Tensor::from_vector<float>({1, 2, 3, 4}, {2, 2});
  m.feeds.emplace_back("x:0", af::encode_tensor_message(tm));
  m.fetches = {"y:0", "z:1"};
  m.targets = {"init"};
  m.timeout_ms = 1500;
  return m;
}

}  // namespace

TEST_CASE("frame header round trip, byte by byte and in one piece") {
  std::string frame = an::encode_frame(3, 5, std::string(24, 'a'));
  REQUIRE(frame.size() == an::kFrameHeaderBytes + 24);
  CHECK(frame.substr(0, 4) == "AFN1");
  for (size_t chunk : {size_t{1}, size_t{7}, frame.size()}) {
    auto frames = read_all(frame + frame, chunk, 4096);
    REQUIRE(frames.ok());
    REQUIRE(frames->size() == 2);
    CHECK((*frames)[0].type == 3);
    CHECK((*frames)[0].flags == 5);
    CHECK((*frames)[1].body() == std::string(24, 'a'));
  }
}

TEST_CASE("frame reader rejects bad magic, bad CRC, oversize, ragged lengths") {
  std::string good = an::encode_frame(1, 0, std::string(16, 'x'));
  std::string bad_magic = good;
  bad_magic[0] = 'X';
  CHECK(read_all(bad_magic, 64, 4096).status().message().find("magic") != std::string::npos);
  std::string bad_crc = good;
  bad_crc.back() ^= 1;
  CHECK(read_all(bad_crc, 64, 4096).status().message().find("CRC") != std::string::npos);
  auto big = an::encode_frame(1, 0, std::string(8192, 'x'));
  auto over = read_all(big, 64, an::kMaxPreAuthFrameBytes);
  CHECK(over.status().code() == af::Code::resource_exhausted);
  CHECK(read_all(big, 64, 1 << 20).ok());
  CHECK_FALSE(read_all(an::encode_frame(1, 0, std::string(13, 'x')), 64, 4096).ok());
  CHECK_FALSE(read_all(an::encode_frame(1, 0, ""), 64, 4096).ok());
  // A lying length: the header claims 2 GiB, the peer sends 100 bytes and stops.
  char hdr[an::kFrameHeaderBytes];
  an::write_frame_header({1, 0, 0x7ffffff8u, 0}, hdr);
  an::FrameReader reader(an::kDefaultMaxMessageBytes);
  std::string lying = std::string(hdr, sizeof hdr) + std::string(100, 'z');
  std::optional<an::RawFrame> f;
  auto used = reader.consume(lying.data(), lying.size(), &f);
  REQUIRE(used.ok());
  CHECK_FALSE(f.has_value());
  CHECK(reader.wanted() == 0x7ffffff8u - 100);
  // Errors are sticky: the connection is to be closed.
  an::FrameReader r2(4096);
  REQUIRE_FALSE(r2.consume(bad_magic.data(), bad_magic.size(), &f).ok());
  CHECK_FALSE(r2.consume(good.data(), good.size(), &f).ok());
}

TEST_CASE("every message survives encode and decode") {
  std::vector<an::Message> msgs = {
      an::HelloMsg{an::kProtoVersion, "client", "/job:worker/task:3", 99, std::string(32, '\x01')},
      an::AuthProofMsg{std::string(32, '\x02')},
      an::WelcomeMsg{12345},
      an::RegisterGraphMsg{5, std::string("graph\0bytes", 11)},
      an::RegisteredMsg{5, 17, af::invalid_argument("no kernel for 'Foo'")},
      sample_step(),
      an::StepDoneMsg{42, af::Status::OK(), {std::string("t1"), std::string("t2")}},
      an::CloseGraphMsg{17},
      an::HeartbeatMsg{1234567},
  };
  for (auto& m : msgs) {
    std::string bytes = an::encode_message(m);
    auto frames = read_all(bytes, 5, an::kDefaultMaxMessageBytes);
    REQUIRE(frames.ok());
    REQUIRE(frames->size() == 1);
    auto back = an::decode_message((*frames)[0], an::kDefaultMaxMessageBytes);
    REQUIRE(back.ok());
    CHECK(back->index() == m.index());
    CHECK(an::encode_message(*back) == bytes);
  }
  auto step = std::get<an::RunStepMsg>(*an::decode_message(read_all(an::encode_message(sample_step()), 64, 1 << 20)->at(0), 1 << 20));
  CHECK(step.fetches == std::vector<std::string>{"y:0", "z:1"});
  auto t = af::decode_tensor_message(step.feeds.at(0).second);
  REQUIRE(t.ok());
  CHECK(t->tensor.equals(af::Tensor::from_vector<float>({1, 2, 3, 4}, {2, 2})));
}

TEST_CASE("a header whose type disagrees with the body is refused") {
  std::string bytes = an::encode_message(an::HeartbeatMsg{1});
  auto frames = read_all(bytes, 64, 4096);
  REQUIRE(frames.ok());
  (*frames)[0].type = 2;
  CHECK_FALSE(an::decode_message((*frames)[0], 4096).ok());
}

TEST_CASE("10,000 mutated frames: errors, never a crash") {
  std::mt19937_64 rng(20261130);
  std::vector<std::string> seeds;
  for (auto& m : std::vector<an::Message>{an::HelloMsg{1, "client", "t", 1, std::string(32, 'n')}, sample_step(),
                                           an::StepDoneMsg{1, af::data_loss("x"), {"abc"}}, an::HeartbeatMsg{5}})
    seeds.push_back(an::encode_message(m));
  int errors = 0, decoded = 0;
  for (int i = 0; i < 10000; ++i) {
    std::string s = seeds[rng() % seeds.size()];
    switch (rng() % 6) {
      case 0:  // flip bytes anywhere, then fix the CRC half of the time so the body parser is hit
      case 1: {
        int flips = 1 + static_cast<int>(rng() % 8);
        for (int k = 0; k < flips; ++k) s[rng() % s.size()] ^= static_cast<char>(1 + rng() % 255);
        if (rng() % 2 && s.size() > an::kFrameHeaderBytes) {
          an::FrameHeader h{static_cast<uint16_t>(1 + rng() % 9), 0, static_cast<uint32_t>(s.size() - an::kFrameHeaderBytes),
                            af::crc32c(s.data() + an::kFrameHeaderBytes, s.size() - an::kFrameHeaderBytes)};
          an::write_frame_header(h, s.data());
        }
        break;
      }
      case 2: s.resize(rng() % s.size()); break;  // truncation
      case 3: {  // a lying length
        an::FrameHeader h{1, 0, static_cast<uint32_t>(rng()), 0};
        an::write_frame_header(h, s.data());
        break;
      }
      case 4: {  // a valid header over a garbage body
        std::string body((1 + rng() % 64) * 8, '\0');
        for (auto& c : body) c = static_cast<char>(rng());
        s = an::encode_frame(static_cast<uint16_t>(rng() % 12), 0, body);
        break;
      }
      default: {  // random bytes
        s.assign(1 + rng() % 200, '\0');
        for (auto& c : s) c = static_cast<char>(rng());
      }
    }
    auto frames = read_all(s, 1 + rng() % 64, an::kMaxPreAuthFrameBytes);
    if (!frames.ok()) {
      ++errors;
      continue;
    }
    for (auto& f : *frames) {
      if (an::decode_message(f, an::kMaxPreAuthFrameBytes).ok()) ++decoded;
      else ++errors;
    }
  }
  INFO("errors " << errors << ", decoded " << decoded);
  CHECK(errors > 5000);
}

TEST_CASE("a genuine handshake is a few hundred bytes: what a daemon reads before authentication") {
  std::string hello = an::encode_message(an::HelloMsg{an::kProtoVersion, "client", "/job:worker/task:12", 1, std::string(32, 'n')});
  std::string proof = an::encode_message(an::AuthProofMsg{std::string(32, 'm')});
  INFO("Hello " << hello.size() << " bytes, AuthProof " << proof.size() << " bytes");
  CHECK(hello.size() + proof.size() < 300);
}
