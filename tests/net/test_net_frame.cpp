// The daemon wire's frames: header, incremental reader, messages, and 10,000 mutated
// frames that must give errors, never crashes.
#include <doctest/doctest.h>

#include <actorflow/actorflow.h>
#include <actorflow/crc32c.h>
#include <actorflow/tensor_codec.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <random>
#include <string>

#include "../../net/src/frame.h"
#include "../../net/src/frame_messages.h"
#include "../../net/src/handshake.h"
#include "net.capnp.h"

#include <capnp/message.h>
#include <capnp/serialize.h>

namespace af = actorflow;
namespace an = actorflow::net;

namespace {

// Feeds `bytes` to a reader in pieces of `chunk` bytes. `on_frame` sees each frame (and
// places its payload, if any); `on_payload` runs when a payload has arrived.
af::Status read_stream(const std::string& bytes, size_t chunk, an::FrameReader& reader,
                       const std::function<af::Status(an::RawFrame&&)>& on_frame,
                       const std::function<void()>& on_payload = [] {}) {
  size_t pos = 0;
  while (pos < bytes.size()) {
    size_t n = std::min(chunk, bytes.size() - pos);
    while (n > 0) {
      std::optional<an::RawFrame> f;
      auto used = reader.consume(bytes.data() + pos, n, &f);
      if (!used.ok()) return used.status();
      pos += *used;
      n -= *used;
      if (f) AF_RETURN_IF_ERROR(on_frame(std::move(*f)));
      if (reader.payload_done()) on_payload();
    }
  }
  if (!reader.idle()) return af::data_loss("truncated: " + std::to_string(reader.wanted()) + " bytes missing");
  return af::Status::OK();
}

// The frames of a stream; a payload is read into a buffer of its own.
af::Result<std::vector<an::RawFrame>> read_all(const std::string& bytes, size_t chunk, uint64_t max_body,
                                               bool authenticated = false) {
  an::FrameReader reader(max_body);
  reader.allow_payloads(authenticated);
  std::vector<an::RawFrame> frames;
  std::vector<std::string> payloads;
  AF_RETURN_IF_ERROR(read_stream(bytes, chunk, reader, [&](an::RawFrame&& f) {
    if (f.payload_bytes) {
      payloads.emplace_back(f.payload_bytes, '\0');
      AF_RETURN_IF_ERROR(reader.place_payload({{payloads.back().data(), payloads.back().size()}}));
    }
    frames.push_back(std::move(f));
    return af::Status::OK();
  }));
  return frames;
}

// Whole messages from a stream, their payloads read into the tensors decode_message made.
af::Result<std::vector<an::Message>> read_messages(const std::string& bytes, size_t chunk, uint64_t max_body) {
  an::FrameReader reader(max_body);
  reader.allow_payloads(true);
  std::vector<an::Message> out;
  std::optional<an::Message> pending;
  AF_RETURN_IF_ERROR(read_stream(
      bytes, chunk, reader,
      [&](an::RawFrame&& f) -> af::Status {
        std::vector<an::PayloadTarget> targets;
        AF_ASSIGN_OR_RETURN(an::Message m, an::decode_message(f, max_body, &targets));
        if (f.payload_bytes == 0) {
          out.push_back(std::move(m));
          return af::Status::OK();
        }
        pending = std::move(m);
        return reader.place_payload(std::move(targets));
      },
      [&] {
        out.push_back(std::move(*pending));
        pending.reset();
      }));
  return out;
}

af::Result<an::Message> decode(const an::RawFrame& f, uint64_t max_bytes) {
  std::vector<an::PayloadTarget> targets;
  return an::decode_message(f, max_bytes, &targets);
}

af::TensorMessage value(af::Tensor t) {
  af::TensorMessage m;
  m.tensor = std::move(t);
  return m;
}

an::RunStepMsg sample_step() {
  an::RunStepMsg m;
  m.handle = 7;
  m.step_id = 42;
  af::TensorMessage tm;
  tm.tensor = af::Tensor::from_vector<float>({1, 2, 3, 4}, {2, 2});
  m.feeds.emplace_back("x:0", tm);
  m.fetches = {"y:0", "z:1"};
  m.targets = {"init"};
  m.timeout_ms = 1500;
  return m;
}

}  // namespace

TEST_CASE("frame header round trip, byte by byte and in one piece") {
  std::string frame = an::encode_frame(3, std::string(24, 'a'));
  REQUIRE(frame.size() == an::kFrameHeaderBytes + 24);
  CHECK(frame.substr(0, 4) == "AFN1");
  for (size_t chunk : {size_t{1}, size_t{7}, frame.size()}) {
    auto frames = read_all(frame + frame, chunk, 4096);
    REQUIRE(frames.ok());
    REQUIRE(frames->size() == 2);
    CHECK((*frames)[0].type == 3);
    CHECK((*frames)[0].flags == 0);
    CHECK((*frames)[1].body() == std::string(24, 'a'));
  }
}

TEST_CASE("frame reader rejects bad magic, bad CRC, oversize, ragged lengths") {
  std::string good = an::encode_frame(1, std::string(16, 'x'));
  std::string bad_magic = good;
  bad_magic[0] = 'X';
  CHECK(read_all(bad_magic, 64, 4096).status().message().find("magic") != std::string::npos);
  std::string bad_crc = good;
  bad_crc.back() ^= 1;
  CHECK(read_all(bad_crc, 64, 4096).status().message().find("CRC") != std::string::npos);
  auto big = an::encode_frame(1, std::string(8192, 'x'));
  auto over = read_all(big, 64, an::kMaxPreAuthFrameBytes);
  CHECK(over.status().code() == af::Code::resource_exhausted);
  CHECK(read_all(big, 64, 1 << 20).ok());
  CHECK_FALSE(read_all(an::encode_frame(1, std::string(13, 'x')), 64, 4096).ok());
  CHECK_FALSE(read_all(an::encode_frame(1, ""), 64, 4096).ok());
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
      an::StepDoneMsg{42, af::Status::OK(), {value(af::Tensor::scalar(1.5f)), value(af::Tensor::scalar(std::string("t2")))}},
      an::CloseGraphMsg{17},
      an::HeartbeatMsg{1234567},
  };
  for (auto& m : msgs) {
    std::string bytes = an::encode_message(m).bytes();
    auto frames = read_all(bytes, 5, an::kDefaultMaxMessageBytes);
    REQUIRE(frames.ok());
    REQUIRE(frames->size() == 1);
    auto back = decode((*frames)[0], an::kDefaultMaxMessageBytes);
    REQUIRE(back.ok());
    CHECK(back->index() == m.index());
    CHECK(an::encode_message(*back).bytes() == bytes);
  }
  auto step = std::get<an::RunStepMsg>(*decode(read_all(an::encode_message(sample_step()).bytes(), 64, 1 << 20)->at(0), 1 << 20));
  CHECK(step.fetches == std::vector<std::string>{"y:0", "z:1"});
  CHECK(step.feeds.at(0).second.tensor.equals(af::Tensor::from_vector<float>({1, 2, 3, 4}, {2, 2})));
}

TEST_CASE("large tensors travel beside the body: written from their buffers, read into new tensors") {
  std::vector<float> big(300000);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<float>(i) * 0.5f;
  af::Tensor a = af::Tensor::from_vector<float>(big, {600, 500});
  af::Tensor b = af::Tensor::from_vector<int64_t>(std::vector<int64_t>(1000, -7), {1000});
  an::RunStepMsg m = sample_step();
  m.feeds.emplace_back("big:0", value(a));
  m.feeds.emplace_back("words:0", value(af::Tensor::from_vector<std::string>({"x", "yz"}, {2})));
  m.feeds.emplace_back("ids:0", value(b));
  an::OutFrame out = an::encode_message(m);
  // Zero copy on the sending side: the payload is the tensors' own memory.
  REQUIRE(out.payload.size() == 2);
  CHECK(out.payload[0].data == static_cast<const char*>(a.raw_data()));
  CHECK(out.payload[0].size == a.bytes());
  CHECK(out.payload[1].data == static_cast<const char*>(b.raw_data()));
  CHECK(out.head.size() < 1024);  // the small feed and the strings stay in the body
  std::string wire = out.bytes();
  for (size_t chunk : {size_t{1} << 20, size_t{4093}, size_t{7}}) {
    an::StepDoneMsg done{9, af::Status::OK(), {value(b), value(af::Tensor::scalar(2.0f))}};
    auto got = read_messages(wire + an::encode_message(done).bytes() + an::encode_message(an::HeartbeatMsg{3}).bytes(),
                             chunk, an::kDefaultMaxMessageBytes);
    REQUIRE(got.ok());
    REQUIRE(got->size() == 3);
    auto& step = std::get<an::RunStepMsg>((*got)[0]);
    REQUIRE(step.feeds.size() == 4);
    CHECK(step.feeds[0].second.tensor.equals(af::Tensor::from_vector<float>({1, 2, 3, 4}, {2, 2})));
    CHECK(step.feeds[1].second.tensor.equals(a));
    CHECK(step.feeds[2].second.tensor.equals(af::Tensor::from_vector<std::string>({"x", "yz"}, {2})));
    CHECK(step.feeds[3].second.tensor.equals(b));
    CHECK(std::get<an::StepDoneMsg>((*got)[1]).fetched.at(0).tensor.equals(b));
    CHECK(std::holds_alternative<an::HeartbeatMsg>((*got)[2]));
  }
}

TEST_CASE("payloads: refused before authentication, over the limit, or disagreeing with the body") {
  af::Tensor a = af::Tensor::filled(af::DType::f32, af::Shape{4096}, 1.0);
  std::string wire = an::encode_message(an::EdgeFrameMsg{1, 2, 3, "/job:worker/task:1/cpu:0", value(a)}).bytes();
  auto pre = read_all(wire, 64, an::kMaxPreAuthFrameBytes, /*authenticated=*/false);
  REQUIRE_FALSE(pre.ok());
  CHECK(pre.status().message().find("payload") != std::string::npos);
  auto over = read_all(wire, 64, 8192, true);
  CHECK(over.status().code() == af::Code::resource_exhausted);
  CHECK(read_all(wire, 64, 1 << 20, true).ok());
  // The header announces one byte more than the body describes.
  auto frames = read_all(wire + "x", 64, 1 << 20, true);
  REQUIRE_FALSE(frames.ok());  // a stray byte starts a bad header
  std::string lying = wire;
  lying[an::kFrameHeaderBytes] = static_cast<char>(lying[an::kFrameHeaderBytes] + 1);
  lying += "x";
  auto lied = read_all(lying, 64, 1 << 20, true);
  REQUIRE(lied.ok());
  auto m = decode(lied->at(0), 1 << 20);
  REQUIRE_FALSE(m.ok());
  CHECK(m.status().message().find("payload") != std::string::npos);
}

TEST_CASE("a header whose type disagrees with the body is refused") {
  std::string bytes = an::encode_message(an::HeartbeatMsg{1}).bytes();
  auto frames = read_all(bytes, 64, 4096);
  REQUIRE(frames.ok());
  (*frames)[0].type = 2;
  CHECK_FALSE(decode((*frames)[0], 4096).ok());
}

TEST_CASE("10,000 mutated frames: errors, never a crash") {
  std::mt19937_64 rng(20261130);
  std::vector<std::string> seeds;
  for (auto& m : std::vector<an::Message>{an::HelloMsg{1, "client", "t", 1, std::string(32, 'n')}, sample_step(),
                                           an::StepDoneMsg{1, af::data_loss("x"), {value(af::Tensor::scalar(1.0f))}},
                                           an::HeartbeatMsg{5}})
    seeds.push_back(an::encode_message(m).bytes());
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
        s = an::encode_frame(static_cast<uint16_t>(rng() % 12), body);
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
      if (decode(f, an::kMaxPreAuthFrameBytes).ok()) ++decoded;
      else ++errors;
    }
  }
  INFO("errors " << errors << ", decoded " << decoded);
  CHECK(errors > 5000);
}

TEST_CASE("a genuine handshake is a few hundred bytes: what a daemon reads before authentication") {
  std::string hello = an::encode_message(an::HelloMsg{an::kProtoVersion, "client", "/job:worker/task:12", 1, std::string(32, 'n')}).bytes();
  std::string proof = an::encode_message(an::AuthProofMsg{std::string(32, 'm')}).bytes();
  INFO("Hello " << hello.size() << " bytes, AuthProof " << proof.size() << " bytes");
  CHECK(hello.size() + proof.size() < 300);
  // The largest Hello a peer may send (its task name at the limit) still fits what a
  // connection reads before authentication, with its AuthProof.
  std::string longest = an::encode_message(an::HelloMsg{an::kProtoVersion, "client", std::string(an::kMaxHelloText, 't'), 1,
                                                        std::string(32, 'n')}).bytes();
  INFO("the longest Hello " << longest.size() << " bytes");
  CHECK(longest.size() + proof.size() <= an::kMaxPreAuthFrameBytes);
}

TEST_CASE("2,000 mutated frames with payloads after authentication: errors, never a crash") {
  std::mt19937_64 rng(20261201);
  af::Tensor a = af::Tensor::filled(af::DType::f32, af::Shape{64, 33}, 0.25);
  an::RunStepMsg step = sample_step();
  step.feeds.emplace_back("a:0", value(a));
  std::vector<std::string> seeds = {
      an::encode_message(an::EdgeFrameMsg{1, 2, 3, "/job:ps/task:0/cpu:0", value(a)}).bytes(),
      an::encode_message(step).bytes(),
      an::encode_message(an::StepDoneMsg{1, af::Status::OK(), {value(a), value(a)}}).bytes()};
  int errors = 0, decoded = 0;
  for (int i = 0; i < 2000; ++i) {
    std::string s = seeds[rng() % seeds.size()];
    switch (rng() % 3) {
      case 0: {  // flip bytes in the header, the payload length or the body, with the CRC fixed
        int flips = 1 + static_cast<int>(rng() % 4);
        for (int k = 0; k < flips; ++k) s[rng() % std::min<size_t>(s.size(), 400)] ^= static_cast<char>(1 + rng() % 255);
        uint32_t len = 0;
        std::memcpy(&len, s.data() + 8, 4);
        size_t head = an::kFrameHeaderBytes + an::kPayloadLengthBytes;
        if (rng() % 2 && len % 8 == 0 && head + len <= s.size()) {
          an::FrameHeader h{static_cast<uint16_t>(s[4]), an::kFramePayload, len, af::crc32c(s.data() + head, len)};
          an::write_frame_header(h, s.data());
        }
        break;
      }
      case 1: s.resize(rng() % s.size()); break;
      default: {  // a lying payload length
        uint64_t claim = rng() % (uint64_t{1} << 34);
        std::memcpy(s.data() + an::kFrameHeaderBytes, &claim, 8);
      }
    }
    auto got = read_messages(s, 1 + rng() % 4096, 1 << 20);
    if (got.ok()) decoded += static_cast<int>(got->size());
    else ++errors;
  }
  INFO("errors " << errors << ", decoded " << decoded);
  CHECK(errors > 1000);
}

namespace {

// A RunStep frame body with one feed whose TensorMsg `fill` writes (hostile on purpose),
// as a received frame announcing `payload_bytes`.
an::RawFrame hostile_step(const std::function<void(actorflow::wire::TensorMsg::Builder)>& fill, uint64_t payload_bytes = 0) {
  capnp::MallocMessageBuilder b;
  auto step = b.initRoot<actorflow::wire::Frame>().initRunStep();
  step.setHandle(1);
  step.setStepId(2);
  auto feeds = step.initFeeds(1);
  feeds[0].setName("x:0");
  fill(feeds[0].initTensor());
  auto flat = capnp::messageToFlatArray(b);
  an::RawFrame f;
  f.type = 6;  // RunStep
  f.flags = payload_bytes ? an::kFramePayload : 0;
  f.size = flat.size() * 8;
  f.words.resize(flat.size());
  std::memcpy(f.words.data(), flat.begin(), f.size);
  f.payload_bytes = payload_bytes;
  return f;
}

}  // namespace

TEST_CASE("tensors are structs in the frame: small frames are one small message") {
  an::OutFrame out = an::encode_message(sample_step());
  CHECK(out.payload.empty());
  CHECK(out.head.size() < 400);  // 312 bytes: header, names, a 2x2 f32 feed
  uint32_t segments_minus_one = 0;
  std::memcpy(&segments_minus_one, out.head.data() + an::kFrameHeaderBytes, 4);
  CHECK(segments_minus_one == 0);
  // A thread's reused first segment leaves nothing behind: the same message gives the same
  // bytes after larger and smaller ones.
  std::string first = an::encode_message(an::HeartbeatMsg{7}).bytes();
  an::RunStepMsg many = sample_step();
  for (int i = 0; i < 40; ++i) many.fetches.push_back("a_long_fetch_name_" + std::to_string(i) + ":0");
  std::string step_bytes = an::encode_message(many).bytes();
  CHECK(an::encode_message(an::HeartbeatMsg{7}).bytes() == first);
  auto frames = read_all(step_bytes, 64, 1 << 20);
  REQUIRE(frames.ok());
  auto back = decode(frames->at(0), 1 << 20);
  REQUIRE(back.ok());
  CHECK(std::get<an::RunStepMsg>(*back).fetches.size() == 42);
  CHECK(an::encode_message(*back).bytes() == step_bytes);
  // Far over the scratch segment: one segment of its own size.
  an::RegisterGraphMsg reg{1, std::string(100000, 'g')};
  std::string reg_bytes = an::encode_message(reg).bytes();
  std::memcpy(&segments_minus_one, reg_bytes.data() + an::kFrameHeaderBytes, 4);
  CHECK(segments_minus_one == 0);
  auto reg_back = decode(read_all(reg_bytes, 4096, 1 << 20)->at(0), 1 << 20);
  REQUIRE(reg_back.ok());
  CHECK(std::get<an::RegisterGraphMsg>(*reg_back).graph_def == reg.graph_def);
}

TEST_CASE("hostile TensorMsg structs in a frame give errors naming the feed") {
  using actorflow::wire::DType;
  auto expect_error = [](const an::RawFrame& f, const char* what) {
    auto m = decode(f, 1 << 20);
    INFO(what);
    REQUIRE_FALSE(m.ok());
    CHECK(m.status().code() == af::Code::data_loss);
    CHECK(m.status().message().find("x:0") != std::string::npos);
  };
  // Sanity: a good one decodes.
  auto good = decode(hostile_step([](auto t) {
                       auto p = t.initTensor();
                       p.setDtype(DType::F32);
                       p.initShape().initDims(1).set(0, 2);
                       p.initData(8);
                     }),
                     1 << 20);
  REQUIRE(good.ok());
  CHECK(std::get<an::RunStepMsg>(*good).feeds.at(0).second.tensor.num_elements() == 2);
  expect_error(hostile_step([](auto t) {
                 auto p = t.initTensor();
                 p.setDtype(DType::F32);
                 p.initShape().initDims(1).set(0, 3);
                 p.initData(8);
               }),
               "data shorter than the shape");
  expect_error(hostile_step([](auto t) {
                 auto p = t.initTensor();
                 p.setDtype(DType::F32);
                 auto d = p.initShape().initDims(2);
                 d.set(0, int64_t{1} << 40);
                 d.set(1, int64_t{1} << 40);
               }),
               "shape past int64");
  expect_error(hostile_step([](auto t) {
                 auto p = t.initTensor();
                 p.setDtype(DType::F32);
                 p.initShape().initDims(1).set(0, -4);
               }),
               "negative dim");
  expect_error(hostile_step([](auto t) {
                 auto p = t.initTensor();
                 p.setDtype(DType::BOOLEAN);
                 p.initShape().initDims(1).set(0, 1);
                 p.initData(1)[0] = 7;
               }),
               "bool byte 7");
  expect_error(hostile_step([](auto t) { t.initStatus().setCode(999); }), "unknown status code");
  expect_error(hostile_step([](auto t) {
                 t.initStatus().setCode(static_cast<int32_t>(af::Code::data_loss));
                 auto p = t.initTensor();
                 p.setDtype(DType::F32);
                 p.initShape().initDims(1).set(0, 1024);
                 p.setBesideBytes(4096);
               }, 4096),
               "failed status and data beside");
  expect_error(hostile_step([](auto t) {
                 auto p = t.initTensor();
                 p.setDtype(DType::F32);
                 p.initShape().initDims(1).set(0, 1 << 20);
                 p.setBesideBytes(4 << 20);
               }, 4096),
               "beside claim over the announced payload");
  expect_error(hostile_step([](auto t) {
                 auto p = t.initTensor();
                 p.setDtype(DType::STRING);
                 p.initShape().initDims(1).set(0, 512);
                 p.setBesideBytes(4096);
               }, 4096),
               "strings beside");
  expect_error(hostile_step([](auto t) {
                 auto p = t.initTensor();
                 p.setDtype(DType::F32);
                 p.initShape().initDims(1).set(0, 1000);
                 p.setBesideBytes(4096);
               }, 4096),
               "beside size disagreeing with the shape");
  // Data beside that the header does not announce.
  auto unannounced = decode(hostile_step([](auto t) {
                              auto p = t.initTensor();
                              p.setDtype(DType::F32);
                              p.initShape().initDims(1).set(0, 1024);
                              p.setBesideBytes(4096);
                            }),
                            1 << 20);
  CHECK_FALSE(unannounced.ok());
}

TEST_CASE("5,000 frames with mutated tensor structs (CRC fixed): errors, never a crash") {
  std::mt19937_64 rng(20261201);
  af::Tensor a = af::Tensor::filled(af::DType::f32, af::Shape{64, 33}, 0.25);
  an::RunStepMsg step = sample_step();
  step.feeds.emplace_back("a:0", value(a));
  step.feeds.emplace_back("b:0", value(af::Tensor::from_vector<bool>({true, false}, {2})));
  std::vector<an::OutFrame> seeds;
  seeds.push_back(an::encode_message(step));
  seeds.push_back(an::encode_message(an::StepDoneMsg{1, af::Status::OK(), {value(a), value(af::Tensor::scalar(3.0f))}}));
  seeds.push_back(an::encode_message(an::EdgeFrameMsg{1, 2, 3, "/job:ps/task:0/cpu:0", value(af::Tensor::scalar(int64_t{5}))}));
  int errors = 0, decoded = 0;
  for (int i = 0; i < 5000; ++i) {
    const an::OutFrame& seed = seeds[rng() % seeds.size()];
    size_t head = an::frame_head_bytes(seed.payload_bytes());
    std::string body = seed.head.substr(head);
    int flips = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < flips; ++k) body[rng() % body.size()] ^= static_cast<char>(1 + rng() % 255);
    an::RawFrame f;
    f.type = static_cast<uint16_t>(seed.head[4]);
    f.flags = seed.payload_bytes() ? an::kFramePayload : 0;
    f.size = body.size();
    f.words.resize(body.size() / 8);
    std::memcpy(f.words.data(), body.data(), body.size());
    f.payload_bytes = seed.payload_bytes();
    std::vector<an::PayloadTarget> targets;
    auto m = an::decode_message(f, 1 << 20, &targets);
    if (m.ok()) {
      ++decoded;
      uint64_t sum = 0;
      for (auto& t : targets) sum += t.size;
      CHECK(sum == f.payload_bytes);
    } else {
      ++errors;
    }
  }
  INFO("errors " << errors << ", decoded " << decoded);
  CHECK(errors + decoded == 5000);
}

TEST_CASE("encode + decode of a small step's frames (informational)") {
  // remote_step_latency's frames: a RunStep with one f32 scalar feed and one fetch, and
  // its StepDone with one f32 scalar.
  an::RunStepMsg step;
  step.handle = 3;
  step.step_id = 1;
  step.feeds.emplace_back("x:0", value(af::Tensor::scalar(2.0f)));
  step.fetches = {"y:0"};
  an::StepDoneMsg done{1, af::Status::OK(), {value(af::Tensor::scalar(3.0f))}};
  auto round = [](const an::Message& m) {
    an::OutFrame out = an::encode_message(m);
    an::FrameReader reader(1 << 20);
    std::optional<an::RawFrame> f;
    auto used = reader.consume(out.head.data(), out.head.size(), &f);
    REQUIRE((used.ok() && f));
    REQUIRE(decode(*f, 1 << 20).ok());
  };
  constexpr int kReps = 200000;
  for (const an::Message& m : std::vector<an::Message>{step, done}) {
    for (int i = 0; i < 1000; ++i) round(m);
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < kReps; ++i) round(m);
    double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / kReps;
    MESSAGE(std::string(an::message_name(m)) << ": encode + read + decode " << us << " us");
  }
}
