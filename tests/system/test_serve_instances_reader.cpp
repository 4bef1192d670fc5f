// actorflow-serve's reader of plain row bodies (tools/actorflow-serve/instances_reader.cpp):
// what it takes it reads exactly as the general reader would (every number correctly
// rounded to double, then to the input's dtype), and what is not strictly that form it
// leaves to the general reader rather than answering itself. The server tests compare
// answers through HTTP, where a reader that gave up would still answer right; these
// check the reader itself.
#include <doctest/doctest.h>

#include "interop/skip.h"

namespace {
[[maybe_unused]] const char* kNotBuilt = "actorflow-serve is not built (libboost-dev missing)";
}

#if AF_SERVE_READER
#include <charconv>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "instances_reader.h"

namespace af = actorflow;
using serve::TensorSpec;

namespace {

const TensorSpec kRow3{"x", af::DType::f32, af::Shape({-1, 3})};

// The number as the general reader gets it: the correctly rounded double.
double exact(const std::string& text) {
  double d = 0;
  auto r = std::from_chars(text.data(), text.data() + text.size(), d);
  REQUIRE(r.ec == std::errc());
  return d;
}

}  // namespace
#endif

TEST_CASE("needs actorflow-serve: plain rows read as their numbers' correctly rounded values") {
#if !AF_SERVE_READER
  aft::skip(kNotBuilt);
#else
  auto t = serve::read_float_instances(R"({"instances": [[1, 2.5, 3], [4, 5, 6e-1]]})", kRow3);
  REQUIRE(t.has_value());
  CHECK(t->shape() == af::Shape({2, 3}));
  CHECK(t->to_vector<float>() == std::vector<float>{1, 2.5f, 3, 4, 5, 0.6f});

  // Blanks wherever JSON allows them, and an unknown inner dimension taken from the rows.
  const TensorSpec any{"x", af::DType::f32, af::Shape({-1, -1})};
  auto b = serve::read_float_instances(" \n{ \"instances\" :\t[ [ 1 ,2 ] ,[3,4]\r] } \n", any);
  REQUIRE(b.has_value());
  CHECK(b->shape() == af::Shape({2, 2}));

  // Numbers of every form, each through double as the general reader reads them:
  // short fractions (the fast path), long mantissas, large and small exponents.
  std::vector<std::string> texts = {"0",        "7",          "0.1",         "0.501961",    "-2.75",  "123456789",
                                    "1e22",     "1e23",       "4.35E-3",     "2.5e+2",      "1E0",    "0.000001",
                                    "9007199254740993",       "12345678901234567890123", "0.30000000000000004441",
                                    "1.7976931348623157e308", "4.9e-324",    "-0.000000000000000000000000123",
                                    // Digit runs of every length around the eight read at once.
                                    "12345678", "123456789", "0.12345678", "0.123456789", "1234567.1234567",
                                    "98765432109876543", "9999999999999999999", "99999999999999999999", "0.0117647"};
  std::mt19937_64 rng(7);
  for (int i = 0; i < 2000; ++i) {
    // Random decimals of up to 17 significant digits and exponents the fast path does
    // and does not take.
    char buf[64];
    double v = std::uniform_real_distribution<double>(-1, 1)(rng) * std::pow(10.0, static_cast<int>(rng() % 60) - 30);
    std::snprintf(buf, sizeof buf, "%.*g", static_cast<int>(1 + rng() % 17), v);
    if (exact(buf) != 0) texts.push_back(buf);
  }
  std::string body = "{\"instances\": [";
  for (size_t i = 0; i < texts.size(); ++i) body += (i ? ", [" : "[") + texts[i] + "]";
  body += "]}";
  const TensorSpec one{"x", af::DType::f64, af::Shape({-1, 1})};
  auto d = serve::read_float_instances(body, one);
  REQUIRE(d.has_value());
  auto got = d->to_vector<double>();
  REQUIRE(got.size() == texts.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    INFO(texts[i]);
    CHECK(got[i] == exact(texts[i]));
  }
  // A float input: the double, then rounded to float (not the decimal straight to float).
  const TensorSpec onef{"x", af::DType::f32, af::Shape({-1, 1})};
  auto f = serve::read_float_instances(body, onef);
  REQUIRE(f.has_value());
  auto gotf = f->to_vector<float>();
  for (size_t i = 0; i < texts.size(); ++i) {
    INFO(texts[i]);
    CHECK(gotf[i] == static_cast<float>(exact(texts[i])));
  }
#endif
}

TEST_CASE("needs actorflow-serve: anything but strict plain rows is left to the general reader") {
#if !AF_SERVE_READER
  aft::skip(kNotBuilt);
#else
  // Each of these is broken JSON, another form, or a value the general reader must judge
  // (a negative zero, which it reads as the integer 0; numbers out of a double's range).
  for (const char* body : {
           R"({"instances": [[1, 2, 3]]} x)",        R"({"instances": [[1, 2, 3]])",     R"({"instances": [[1, 2, 3]]}})",
           R"({"instances": []})",                   R"({"instances": [[1, 2]]})",        R"({"instances": [[1, 2, 3, 4]]})",
           R"({"instances": [[[1], [2], [3]]]})",    R"({"instances": [1, 2, 3]})",       R"({"instances": [[true, 2, 3]]})",
           R"({"instances": [[1, 2, "3"]]})",        R"({"instances": [[1, 2, null]]})",  R"({"instances": [[01, 2, 3]]})",
           R"({"instances": [[1., 2, 3]]})",         R"({"instances": [[.5, 2, 3]]})",    R"({"instances": [[+1, 2, 3]]})",
           R"({"instances": [[1e, 2, 3]]})",         R"({"instances": [[1e+, 2, 3]]})",   R"({"instances": [[-, 2, 3]]})",
           R"({"instances": [[-0, 2, 3]]})",         R"({"instances": [[-0.0, 2, 3]]})",  R"({"instances": [[1e400, 2, 3]]})",
           R"({"instances": [[NaN, 2, 3]]})",        R"({"instances": [[Infinity, 2, 3]]})", R"({"instances": [[1, 2, 3],]})",
           R"({"instances": [[1, 2, 3,]]})",         R"({"instances": [[1 2 3]]})",       R"({"inputs": [[1, 2, 3]]})",
           R"({"\u0069nstances": [[1, 2, 3]]})",     R"({"instances": [[1, 2, 3]], "signature_name": "serving_default"})",
           R"({"signature_name": "serving_default", "instances": [[1, 2, 3]]})",
           R"({"instances": [[1, 2, 3]], "instances": [[4, 5, 6]]})",  R"([[1, 2, 3]])", "", "{",
       }) {
    INFO(body);
    CHECK_FALSE(serve::read_float_instances(body, kRow3).has_value());
  }
  // Other dtypes are the general reader's too.
  CHECK_FALSE(serve::read_float_instances(R"({"instances": [[1, 2, 3]]})", TensorSpec{"x", af::DType::i32, af::Shape({-1, 3})}).has_value());
#endif
}

TEST_CASE("needs actorflow-serve: runs of plain zeros read as zeros wherever they start and end") {
#if !AF_SERVE_READER
  aft::skip(kNotBuilt);
#else
  // Rows of 40 values: a run of `len` zeros from `at`, written "0," with no blanks (the
  // form read eight at a time), the other values not zero, so that a zero read in the
  // wrong place or a value swallowed by a run changes the row.
  constexpr int kWidth = 40;
  const TensorSpec row{"x", af::DType::f32, af::Shape({-1, kWidth})};
  std::string body = "{\"instances\": [";
  std::vector<float> want;
  int rows = 0;
  for (int len = 0; len <= kWidth; ++len)
    for (int at = 0; at + len <= kWidth; at += 3) {
      body += rows++ ? ",[" : "[";
      for (int i = 0; i < kWidth; ++i) {
        bool zero = i >= at && i < at + len;
        float v = zero ? 0.0f : static_cast<float>(i) + 1.5f;
        want.push_back(v);
        body += (i ? "," : "") + (zero ? std::string("0") : std::to_string(i + 1) + ".5");
      }
      body += "]";
    }
  body += "]}";
  auto t = serve::read_float_instances(body, row);
  REQUIRE(t.has_value());
  CHECK(t->shape() == af::Shape({rows, kWidth}));
  CHECK(t->to_vector<float>() == want);

  // A run is only values: one that ends in a comma before the row's end, a row that
  // ends inside one or is a value short or long, is the general reader's to judge.
  const TensorSpec sixteen{"x", af::DType::f32, af::Shape({-1, 16})};
  const std::string zeros16 = "0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0";
  for (const std::string& bad : {"{\"instances\": [[" + zeros16 + ",]]}", "{\"instances\": [[" + zeros16 + "]",
                                 "{\"instances\": [[" + zeros16 + ",0]]}", "{\"instances\": [[" + zeros16.substr(2) + "]]}",
                                 "{\"instances\": [[" + zeros16 + ",", std::string("{\"instances\": [[0,0,0,0,0,0,0,0,")}) {
    INFO(bad);
    CHECK_FALSE(serve::read_float_instances(bad, sixteen).has_value());
  }
  auto ok = serve::read_float_instances("{\"instances\": [[" + zeros16 + "]]}", sixteen);
  REQUIRE(ok.has_value());
  CHECK(ok->to_vector<float>() == std::vector<float>(16, 0.0f));
#endif
}
