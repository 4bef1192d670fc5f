// Deterministic fuzzing of the decoders: Graph::deserialize on 10,000 random and mutated
// inputs, decode_tensor_message on 1,000. Each input must give an error or a valid
// result, never a crash, a hang or a sanitizer report.
#include <doctest/doctest.h>

#include <actorflow/tensor_codec.h>
#include <capnp/message.h>
#include <capnp/serialize.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <random>

#include "graph_def_model.h"
#include "tensor.capnp.h"

namespace af = actorflow;

namespace {

using Rng = std::mt19937_64;

size_t below(Rng& rng, size_t n) { return n ? static_cast<size_t>(rng() % n) : 0; }

std::string random_bytes(Rng& rng, size_t n) {
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(rng());
  return s;
}

// Values that tend to matter in lengths, counts, offsets and dims.
uint64_t interesting(Rng& rng) {
  static const uint64_t values[] = {0, 1, 2, 7, 8, 0xff, 0xffff, 0x7fffffff, 0x80000000, 0xffffffff,
                                    0x7fffffffffffffff, 0x8000000000000000, ~uint64_t{0}, 0xfffffffffffffffe,
                                    uint64_t{1} << 29, uint64_t{1} << 32, uint64_t{1} << 40};
  return values[below(rng, std::size(values))];
}

// One mutation of `base`; `kind` picks which.
std::string mutate(Rng& rng, const std::string& base, int kind) {
  std::string s = base;
  size_t words = s.size() / 8;
  switch (kind) {
    case 0: {  // bit flips
      int n = 1 + static_cast<int>(below(rng, 8));
      for (int i = 0; i < n && !s.empty(); ++i) s[below(rng, s.size())] ^= static_cast<char>(1 << below(rng, 8));
      break;
    }
    case 1: {  // byte overwrites
      int n = 1 + static_cast<int>(below(rng, 8));
      for (int i = 0; i < n && !s.empty(); ++i) s[below(rng, s.size())] = static_cast<char>(rng());
      break;
    }
    case 2:  // truncation, to any length
      s.resize(below(rng, s.size()));
      break;
    case 3:  // extension: zeros, random bytes, or a copy of itself
      switch (below(rng, 3)) {
        case 0: s += std::string(8 * (1 + below(rng, 8)), '\0'); break;
        case 1: s += random_bytes(rng, below(rng, 64)); break;
        default: s += base; break;
      }
      break;
    case 4: {  // swapped words
      if (words < 2) break;
      size_t a = below(rng, words), b = below(rng, words);
      for (int k = 0; k < 8; ++k) std::swap(s[a * 8 + static_cast<size_t>(k)], s[b * 8 + static_cast<size_t>(k)]);
      break;
    }
    case 5: {  // a chunk copied elsewhere
      if (s.size() < 16) break;
      size_t len = 8 * (1 + below(rng, 32));
      len = std::min(len, s.size() / 2);
      size_t from = below(rng, s.size() - len), to = below(rng, s.size() - len);
      std::memmove(s.data() + to, base.data() + from, len);
      break;
    }
    default: {  // an interesting value over a word
      if (!words) break;
      uint64_t v = interesting(rng);
      size_t at = below(rng, words) * 8 + (below(rng, 2) ? 4 : 0);
      std::memcpy(s.data() + at, &v, std::min<size_t>(8, s.size() - at));
      break;
    }
  }
  return s;
}

constexpr int kMutationKinds = 7;

std::string flat_bytes(capnp::MessageBuilder& mb) {
  auto words = capnp::messageToFlatArray(mb);
  return std::string(reinterpret_cast<const char*>(words.asBytes().begin()), words.asBytes().size());
}

// The encoder places large data to suit its buffer's address; capnp's own layout of the
// same message is the same on every run, which keeps the mutations deterministic.
std::string canonical(const std::string& bytes) {
  kj::Array<capnp::word> words = kj::heapArray<capnp::word>(bytes.size() / 8);
  std::memcpy(words.begin(), bytes.data(), bytes.size());
  capnp::FlatArrayMessageReader reader(words);
  capnp::MallocMessageBuilder mb;
  mb.setRoot(reader.getRoot<af::wire::TensorMsg>());
  return flat_bytes(mb);
}

// AF_FUZZ_SEED / AF_FUZZ_ITERATIONS run other or longer campaigns by hand.
uint64_t env_or(const char* name, uint64_t dflt) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtoull(v, nullptr, 10) : dflt;
}

// Touches every part of a decoded graph; a valid graph must also re-serialize.
void exercise(const af::Graph& g) {
  std::string listing = g.to_string();
  CHECK(listing.size() >= static_cast<size_t>(g.num_nodes()));
  auto order = g.topological_order();
  REQUIRE(order.ok());
  CHECK(order->size() == static_cast<size_t>(g.num_nodes()));
  auto again = af::Graph::deserialize(g.serialize());
  REQUIRE_MESSAGE(again.ok(), again.status().to_string());
  CHECK((*again)->num_nodes() == g.num_nodes());
}

}  // namespace

TEST_CASE("fuzz: Graph::deserialize on 10,000 random and mutated inputs") {
  aft::Model m = aft::build_model();
  const std::string valid = m.g->serialize();
  REQUIRE(af::Graph::deserialize(valid).ok());
  // A small graph too: mutations of a short message reach its header and root more often.
  af::Graph small;
  auto p = af::placeholder(small, af::f32, {-1, 2}, "p");
  af::reduce_sum(p * 2.0, {1}, true);
  af::group(small, {af::no_op(small)}, "g");
  const std::string small_valid = small.serialize();

  Rng rng(env_or("AF_FUZZ_SEED", 20240611));
  const uint64_t iterations = env_or("AF_FUZZ_ITERATIONS", 10000);
  int random_total = 0, random_ok = 0, mutated_total = 0, mutated_ok = 0;
  double slowest = 0;
  auto start = std::chrono::steady_clock::now();
  for (uint64_t i = 0; i < iterations; ++i) {
    std::string input;
    bool is_random = i % 10 == 0;
    if (is_random) {
      size_t len = i % 20 == 0 ? below(rng, 64) : below(rng, 4096);
      input = random_bytes(rng, len);
      // Half of them get a plausible one-segment header, to get past the framing.
      if (len >= 16 && below(rng, 2)) {
        uint32_t header[2] = {0, static_cast<uint32_t>(len / 8 - 1)};
        std::memcpy(input.data(), header, 8);
        input.resize(len / 8 * 8);
      }
    } else {
      const std::string& base = i % 4 == 1 ? small_valid : valid;
      input = mutate(rng, base, static_cast<int>(below(rng, kMutationKinds)));
      if (below(rng, 4) == 0) input = mutate(rng, input, static_cast<int>(below(rng, kMutationKinds)));
    }
    auto t0 = std::chrono::steady_clock::now();
    auto r = af::Graph::deserialize(input);
    slowest = std::max(slowest, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    (is_random ? random_total : mutated_total)++;
    if (r.ok()) {
      (is_random ? random_ok : mutated_ok)++;
      exercise(**r);
    } else {
      CHECK_FALSE(r.status().message().empty());
    }
  }
  double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  MESSAGE("random inputs: " << random_ok << "/" << random_total << " parsed; mutated: " << mutated_ok << "/"
                            << mutated_total << " parsed; " << total << " s in all, slowest input " << slowest << " s");
  // Both outcomes occur: mutations that keep a valid graph, and rejected inputs.
  CHECK(mutated_ok > mutated_total / 100);
  CHECK(mutated_total - mutated_ok > mutated_total / 10);
  CHECK(random_ok * 10 < random_total);
}

TEST_CASE("fuzz: decode_tensor_message on 1,000 mutated inputs") {
  std::vector<std::string> bases;
  auto add = [&](af::Tensor t, af::Status s = {}) {
    af::TensorMessage m;
    m.step_id = 42;
    m.edge = 3;
    m.producer = "producer:1";
    m.tensor = std::move(t);
    m.status = std::move(s);
    bases.push_back(af::encode_tensor_message(m));
  };
  add(af::Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3}));
  add(af::Tensor::from_vector<std::string>({"a", "bb", "", "dddd"}, {2, 2}));
  add(af::Tensor::from_vector<bool>({true, false, true}, {3}));
  add(af::Tensor::from_vector<int64_t>({-1, 0, 1}, {3, 1}));
  add(af::Tensor::filled(af::f64, af::Shape{64, 16}, 2.5));  // past the external-data size
  add(af::Tensor::scalar(uint8_t{7}));
  add(af::Tensor(), af::Status(af::Code::cancelled, "step cancelled"));
  for (auto& b : bases) b = canonical(b);
  // And a two-segment message, its data in a segment of its own, as the encoder sends
  // large tensors.
  std::vector<double> values(1024, 0.25);
  {
    capnp::MallocMessageBuilder mb;
    auto msg = mb.initRoot<af::wire::TensorMsg>();
    msg.setProducer("external:0");
    auto t = msg.initTensor();
    t.setDtype(af::wire::DType::F64);
    auto dims = t.initShape().initDims(2);
    dims.set(0, 32);
    dims.set(1, 32);
    t.adoptData(mb.getOrphanage().referenceExternalData(
        capnp::Data::Reader(reinterpret_cast<const kj::byte*>(values.data()), values.size() * sizeof(double))));
    bases.push_back(flat_bytes(mb));
  }
  for (auto& b : bases) REQUIRE(af::decode_tensor_message(b).ok());

  Rng rng(env_or("AF_FUZZ_SEED", 77));
  const uint64_t iterations = env_or("AF_FUZZ_ITERATIONS", 10000) / 10;
  int ok = 0, failed = 0;
  for (uint64_t i = 0; i < iterations; ++i) {
    const std::string& base = bases[below(rng, bases.size())];
    std::string input = mutate(rng, base, static_cast<int>(below(rng, kMutationKinds)));
    auto r = af::decode_tensor_message(std::move(input));
    if (!r.ok()) {
      ++failed;
      CHECK_FALSE(r.status().message().empty());
      continue;
    }
    ++ok;
    const af::Tensor& t = r->tensor;
    if (!t.valid()) continue;
    // Read every element: the sanitizers check the decoded tensor is all in bounds.
    double sum = 0;
    if (t.dtype() == af::string) {
      for (int64_t k = 0; k < t.num_elements(); ++k) sum += static_cast<double>(t.data<std::string>()[k].size());
    } else {
      for (int64_t k = 0; k < t.num_elements(); ++k) sum += t.element_as_double(k);
    }
    (void)sum;
    CHECK(t.num_elements() == t.shape().num_elements());
    CHECK_FALSE(t.debug_string().empty());
  }
  MESSAGE("tensor messages: " << ok << " decoded, " << failed << " rejected");
  CHECK(ok > static_cast<int>(iterations / 20));
  CHECK(failed > static_cast<int>(iterations / 20));
}
