// actorflow-serve under bad input: 1,000 requests drawn from a seeded generator (broken
// JSON, wrong shapes and dtypes, bodies over the limit, unknown paths, malformed HTTP,
// valid ones in between) each get the status they should, while a score of slow
// clients hold half-sent requests open; the server keeps answering, closes the slow
// ones at its read deadline, and its memory stays flat. Then 10,000 predicts mutated
// from valid ones (numbers, strings, nesting up to a million deep, sizes at the limits)
// get 200 or a short {"error": ...}, and the server ends alive, as large as it began
// within 64 MiB.
#include <doctest/doctest.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <cerrno>
#include <cmath>
#include <random>

#include "test_serve_util.h"

using namespace afserve;

namespace {

// True when the server has closed the connection: an orderly end or a reset, not the
// receive timeout running out.
bool closed_by_server(int fd) {
  char buf[256];
  for (int i = 0; i < 1000; ++i) {
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n == 0) return true;
    if (n < 0) return errno != EAGAIN && errno != EWOULDBLOCK;
  }
  return false;
}

json row_of(const std::vector<float>& r) { return json(r); }

}  // namespace

TEST_CASE("needs python3-sklearn: 1000 fuzzed requests get the right status and the server keeps serving") {
  need_serving();
  TempDir work("fuzz");
  fs::path base = work.path / "model";
  train_and_export(work.path, base, 1, 7);
  auto rows = feature_rows();
  constexpr int kMaxBody = 65536;
  ServeProcess server({"--model_name", "cancer", "--model_base_path", base.string(), "--max_body_bytes", std::to_string(kMaxBody),
                       "--read_timeout_ms", "700", "--access_log=false"});
  REQUIRE_MESSAGE(server.started(), server.log());
  const int port = server.port();
  const std::string predict = "/v1/models/cancer:predict";

  // The answers to valid requests, asked once, to compare the fuzz loop's valid ones with.
  auto ref = http_call(port, "POST", predict, instances_body(rows, 0, 50));
  REQUIRE(ref.status == 200);
  auto want = predictions(ref);
  REQUIRE(want.size() == 50);

  // A client that asks permission to send its body ("Expect: 100-continue", as curl does
  // for bodies over 1 MiB) gets it at once, then its answer.
  {
    std::string body = instances_body(rows, 0, 2);
    int fd = connect_raw(port);
    REQUIRE(fd >= 0);
    std::string head = "POST " + predict + " HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: " +
                       std::to_string(body.size()) + "\r\n\r\n";
    REQUIRE(::send(fd, head.data(), head.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(head.size()));
    char buf[256];
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    REQUIRE(n > 0);
    CHECK(std::string(buf, static_cast<size_t>(n)).rfind("HTTP/1.1 100 Continue\r\n", 0) == 0);
    REQUIRE(::send(fd, body.data(), body.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(body.size()));
    n = ::recv(fd, buf, sizeof buf, 0);
    REQUIRE(n > 0);
    CHECK(std::string(buf, static_cast<size_t>(n)).rfind("HTTP/1.1 200 OK\r\n", 0) == 0);
    ::close(fd);
  }

  // Slow clients: half a request each, never finished.
  std::vector<int> slow;
  for (int i = 0; i < 20; ++i) {
    int fd = connect_raw(port);
    REQUIRE(fd >= 0);
    std::string half = i % 2 ? "POST /v1/models/cancer:predict HTTP/1.1\r\nHost: x\r\nContent-Len"
                             : "POST /v1/models/cancer:predict HTTP/1.1\r\nHost: x\r\nContent-Length: 500\r\n\r\n{\"instances\": [[";
    REQUIRE(::send(fd, half.data(), half.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(half.size()));
    slow.push_back(fd);
  }

  std::mt19937 rng(14);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  long rss_warm = 0;
  int counts[8] = {};
  for (int i = 0; i < 1000; ++i) {
    if (i == 300) rss_warm = server.rss_kb();
    int kind = pick(8);
    ++counts[kind];
    int r = pick(50);
    json valid = json{{"instances", {row_of(rows[static_cast<size_t>(r)])}}};
    int want_status = 400;
    bool names_input = false;
    std::string body, target = predict, method = "POST";
    int got = 0;
    std::string got_body;
    switch (kind) {
      case 0: {  // broken JSON: a proper prefix of a valid object, or stray bytes
        std::string text = valid.dump();
        if (pick(2)) body = text.substr(0, static_cast<size_t>(pick(static_cast<int>(text.size()))));
        else body = std::string(1 + pick(64), static_cast<char>(1 + pick(120)));
        if (body.empty()) body = "{";
        break;
      }
      case 1: {  // a wrong shape: too few or too many values, a level too deep, a bare number
        json row = row_of(rows[static_cast<size_t>(r)]);
        int how = pick(3);
        if (how == 0) {
          int n = 1 + pick(60);
          if (n == 30) n = 31;
          row = json(std::vector<float>(static_cast<size_t>(n), 0.5f));
        } else if (how == 1) {
          row = json::array({row});
        } else {
          row = 1.5;
        }
        body = json{{"instances", {row}}}.dump();
        names_input = true;
        break;
      }
      case 2: {  // a wrong dtype in one place
        json row = row_of(rows[static_cast<size_t>(r)]);
        json bad[] = {"text", true, nullptr, json::object({{"a", 1}})};
        row[static_cast<size_t>(pick(30))] = bad[pick(4)];
        body = (pick(2) ? json{{"instances", {row}}} : json{{"inputs", {row}}}).dump();
        names_input = true;
        break;
      }
      case 3: {  // over the body limit: sent whole, or only announced
        want_status = 413;
        if (pick(2)) {
          body = std::string(static_cast<size_t>(kMaxBody + 1 + pick(3 * kMaxBody)), ' ');
        } else {
          got = raw_status(port, "POST " + predict + " HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(kMaxBody * 100) +
                                     "\r\n\r\n{\"instances\"");
        }
        break;
      }
      case 4: {  // unknown model, version or path: 404; the wrong method: 405
        std::string targets[] = {"/v1/models/nope:predict", "/v1/models/cancer/versions/" + std::to_string(2 + pick(100)) + ":predict",
                                 "/v2/whatever", "/v1/models/cancer:classify"};
        int t = pick(5);
        if (t < 4) {
          target = targets[t];
          want_status = 404;
        } else {
          method = "GET";
          want_status = 405;
        }
        body = valid.dump();
        break;
      }
      case 5: {  // malformed HTTP
        std::string junk[] = {"GARBAGE\r\n\r\n", "POST /x HTTP/9.9\r\n\r\n", "POST " + predict + " HTTP/1.1\r\nContent-Length: -4\r\n\r\n",
                              "POST " + predict + " HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"};
        got = raw_status(port, junk[pick(4)]);
        break;
      }
      default: {  // valid: one to three rows, answered as the reference says
        int n = 1 + pick(3);
        body = instances_body(rows, static_cast<size_t>(r), static_cast<size_t>(std::min(50, r + n)));
        want_status = 200;
        break;
      }
    }
    if (got == 0 && !(kind == 3 && body.empty()) && kind != 5) {
      auto reply = http_call(port, method, target, body);
      got = reply.status;
      got_body = reply.body;
      if (got == 0) got_body = reply.error;
    }
    INFO("request " << i << " kind " << kind << ": " << body.substr(0, 200) << " -> " << got_body.substr(0, 300));
    REQUIRE(got == want_status);
    if (got != 200 && kind != 5 && !(kind == 3 && got_body.empty())) {
      auto doc = json::parse(got_body, nullptr, false);
      CHECK((doc.is_object() && doc["error"].is_string()));
    }
    if (names_input) {
      CHECK(got_body.find("'x'") != std::string::npos);
      CHECK(got_body.find("[-1,30]") != std::string::npos);
    }
    if (got == 200) {
      auto p = predictions(Reply{200, got_body});
      // Fewer rows than the reference's 50 may take another matmul path: equal to rounding.
      for (size_t k = 0; k < p.size(); ++k) {
        double w = want[static_cast<size_t>(r) + k];
        CHECK(std::abs(p[k] - w) <= 1e-5 * std::max(1.0, std::abs(w)));
      }
    }
  }
  for (int k = 0; k < 8; ++k) CHECK(counts[k] > 50);  // every kind was drawn

  // The slow clients were cut off at the read deadline, without an answer.
  for (int fd : slow) {
    CHECK(closed_by_server(fd));
    ::close(fd);
  }
  // Still serving, with the same answers, and memory did not grow with the requests.
  auto after = http_call(port, "POST", predict, instances_body(rows, 0, 50));
  REQUIRE(after.status == 200);
  CHECK(predictions(after) == want);
  long rss_end = server.rss_kb();
  MESSAGE("RSS after 300 requests " << rss_warm << " kB, after 1000: " << rss_end << " kB");
  CHECK(rss_warm > 0);
#ifdef __SANITIZE_ADDRESS__
  // An ASan build of the server keeps freed blocks in its quarantine (256 MiB by default)
  // before reusing them, so its resident memory grows by design.
  constexpr long kSlackKiB = 256 * 1024 + 16 * 1024;
#else
  constexpr long kSlackKiB = 16 * 1024;
#endif
  CHECK(rss_end - rss_warm < kSlackKiB);
  CHECK(server.running());
  CHECK(server.terminate(std::chrono::seconds(30)) == 0);
}

namespace {

// A fuzzed predict: its body and the status it must get (0: 200 or 400, as the
// mutation happens to fall).
struct Mutant {
  std::string body;
  int want = 0;
  const char* what = "";
};

// Where the numbers of a generated body are: runs of number characters after '[', ',' or ' '.
std::vector<std::pair<size_t, size_t>> number_spans(const std::string& s) {
  std::vector<std::pair<size_t, size_t>> out;
  for (size_t i = 1; i < s.size(); ++i) {
    char c = s[i], before = s[i - 1];
    if (!((c >= '0' && c <= '9') || c == '-') || !(before == '[' || before == ',' || before == ' ')) continue;
    size_t j = i;
    while (j < s.size() && std::strchr("0123456789-+.eE", s[j])) ++j;
    out.emplace_back(i, j - i);
    i = j;
  }
  return out;
}

class PredictFuzzer {
 public:
  PredictFuzzer(const std::vector<std::vector<float>>& rows, size_t max_body, uint64_t seed) : rng_(seed), max_body_(max_body) {
    for (auto& r : rows) row_text_.push_back(json(r).dump());
  }

  int pick(int n) { return static_cast<int>(rng_() % static_cast<uint64_t>(n)); }
  // 1 to 1,000,000, about as many of each order of magnitude.
  size_t depth() { return static_cast<size_t>(std::exp(std::uniform_real_distribution<double>(0, std::log(1e6))(rng_))); }

  Mutant next() {
    int form = pick(4);
    int n = 1 + pick(3);
    size_t first = static_cast<size_t>(pick(static_cast<int>(row_text_.size()) - 3));
    std::string body = valid(form, first, static_cast<size_t>(n));
    auto spans = number_spans(body);
    auto at = spans[static_cast<size_t>(pick(static_cast<int>(spans.size())))];
    auto replace_number = [&](const std::string& with) { body.replace(at.first, at.second, with); };
    int op = pick(100);
    if (op < 6) {  // a number spelled every way JSON allows: read as strtod reads it
      static const char* kValid[] = {"1e-400", "-0", "-0.0", "0e0", "1E+2", "18446744073709551616", "-9223372036854775809",
                                     "1.7976931348623157e308", "4.9e-324", "123456789012345678901234567890", "-1e-999999999999999999"};
      replace_number(kValid[pick(11)]);
      return {body, 200, "a valid number"};
    }
    if (op < 8) {  // past a double's range: refused, as the JSON parser refuses it
      static const char* kHuge[] = {"1e309", "-1e309", "1e999999999999999999", "1.8e308"};
      replace_number(kHuge[pick(4)]);
      return {body, 400, "a number past a double's range"};
    }
    if (op < 10) {  // up to 308 nines are a double, 309 are past its range
      size_t digits = 1 + static_cast<size_t>(pick(pick(2) ? 400 : 5000));
      replace_number(std::string(digits, '9'));
      return {body, digits <= 308 ? 200 : 400, "a long digit string"};
    }
    if (op < 16) {  // not JSON numbers
      static const char* kInvalid[] = {"NaN", "nan", "Infinity", "-Infinity", "01", "1.", "+1", ".5", "-", "1e", "0x1F", "1e+", "--1", "1..2"};
      replace_number(kInvalid[pick(14)]);
      return {body, 400, "an invalid number"};
    }
    if (op < 24) {  // not a number where one belongs
      static const char* kOther[] = {"\"abc\"", "\"\"", "\"\\u0000\"", "\"\\ud800\"", "\"\xff\xfe\"", "true", "false", "null", "{}", "[]",
                                     "{\"x\": 1}", "[1]"};
      if (pick(5) == 0) replace_number("\"" + std::string(static_cast<size_t>(1 + pick(256 * 1024)), static_cast<char>(pick(2) ? 'a' : 1)) + "\"");
      else replace_number(kOther[pick(12)]);
      return {body, 400, "not a number"};
    }
    if (op < 36) {  // nesting around a number, balanced or not
      size_t d = 1 + depth();
      if (pick(4) == 0) replace_number(std::string(d, '['));
      else replace_number(std::string(d, '[') + body.substr(at.first, at.second) + std::string(d, ']'));
      return {body, 400, "a nested number"};
    }
    if (op < 42) {  // nesting around a whole row, or as the rows
      size_t d = depth();
      size_t open = body.rfind('[', at.first), close = body.find(']', at.first);
      if (pick(2)) body.replace(open, close + 1 - open, std::string(d, '[') + body.substr(open, close + 1 - open) + std::string(d, ']'));
      else body = std::string(form < 2 ? "{\"instances\": " : "{\"inputs\": ") + std::string(d, '[') + std::string(d, ']') + "}";
      return {body, 400, "nested rows"};
    }
    if (op < 48) {  // nesting in a key the reader skips or in signature_name
      size_t d = depth();
      bool sig = pick(2);
      body.insert(1, std::string(sig ? "\"signature_name\": " : "\"extra\": ") + std::string(d, '[') + std::string(d, ']') + ", ");
      // The body's object is one level; 99 lists in it are the most that may be skipped.
      return {body, sig || d > 99 ? 400 : 200, "nesting in another key"};
    }
    if (op < 54) {  // empty lists
      size_t open = body.rfind('[', at.first), close = body.find(']', at.first);
      int how = pick(3);
      if (how == 0) body.replace(open, close + 1 - open, "[]");
      else if (how == 1) body = form < 2 ? "{\"instances\": []}" : "{\"inputs\": []}";
      else body = form < 2 ? "{\"instances\": [[]]}" : "{\"inputs\": [[]]}";
      return {body, 400, "empty lists"};
    }
    if (op < 60) {  // ragged: a row one value short or long
      if (pick(2)) {
        size_t from = at.first, len = at.second;
        if (body[from + len] == ',') ++len;
        else if (body[from - 1] == ',') --from, ++len;
        body.erase(from, len);
      } else {
        body.insert(at.first, body.substr(at.first, at.second) + ",");
      }
      return {body, 400, "a ragged row"};
    }
    if (op < 61) {  // many rows, around the body limit
      size_t want = static_cast<size_t>(std::uniform_real_distribution<double>(0.5, 1.15)(rng_) * static_cast<double>(max_body_));
      std::string big = form < 2 ? "{\"instances\": [" : "{\"inputs\": [";
      for (size_t i = 0; big.size() < want; ++i) big += (i ? "," : "") + row_text_[i % row_text_.size()];
      big += "]}";
      return {big, big.size() > max_body_ ? 413 : 200, "many rows"};
    }
    if (op < 76) {  // bytes flipped, cut, dropped or added
      for (int k = 0, edits = 1 + pick(4); k < edits && !body.empty(); ++k) {
        size_t i = static_cast<size_t>(pick(static_cast<int>(body.size())));
        switch (pick(4)) {
          case 0: body[i] = static_cast<char>(pick(256)); break;
          case 1: body.resize(i); break;
          case 2: body.erase(i, static_cast<size_t>(1 + pick(16))); break;
          default: body.insert(i, 1, "[]{},:\"0-e \\"[pick(12)]); break;
        }
      }
      return {body, 0, "bytes changed"};
    }
    if (op < 84) {  // the keys: swapped, misspelt, repeated, both
      int how = pick(4);
      size_t q = body.find('"', 1), e = body.find('"', q + 1);
      if (how == 0) {
        body.replace(q + 1, e - q - 1, form < 2 ? "inputs" : "instances");
        return {body, 0, "instances and inputs swapped"};
      }
      if (how == 1) {
        body.replace(q + 1, e - q - 1, pick(2) ? "instance" : "");
        return {body, 400, "a misspelt key"};
      }
      std::string again = valid(form, first, 1);
      if (how == 2) {  // the same key twice: the last counts
        body = body.substr(0, body.size() - 1) + ", " + again.substr(1);
        return {body, 200, "a repeated key"};
      }
      std::string other = valid(form < 2 ? 2 : 0, first, 1);
      body = body.substr(0, body.size() - 1) + ", " + other.substr(1);
      return {body, 400, "both instances and inputs"};
    }
    // signature_name: right, empty, wrong, long, not a string
    static const char* kSig[] = {"\"serving_default\"", "\"\"", "\"predict\"", "5", "null", "[\"serving_default\"]", "{}"};
    int s = pick(8);
    std::string sig = s < 7 ? kSig[s] : "\"" + std::string(static_cast<size_t>(1 + pick(512 * 1024)), 's') + "\"";
    body.insert(1, "\"signature_name\": " + sig + ", ");
    return {body, s < 2 ? 200 : 400, "signature_name"};
  }

 private:
  // Rows first.. in one of the four forms: rows, named rows, columnar, named columnar.
  std::string valid(int form, size_t first, size_t n) {
    std::string list;
    for (size_t i = first; i < first + n; ++i) {
      if (i > first) list += ", ";
      list += form == 1 ? "{\"x\": " + row_text_[i] + "}" : row_text_[i];
    }
    if (form < 2) return "{\"instances\": [" + list + "]}";
    if (form == 2) return "{\"inputs\": [" + list + "]}";
    return "{\"inputs\": {\"x\": [" + list + "]}}";
  }

  std::mt19937_64 rng_;
  size_t max_body_;
  std::vector<std::string> row_text_;
};

}  // namespace

TEST_CASE("needs python3-sklearn: 10,000 predicts mutated from valid ones get 200 or a short JSON error, and the server lives on") {
  need_serving();
  TempDir work("mutants");
  fs::path base = work.path / "model";
  train_and_export(work.path, base, 1, 9);
  auto rows = feature_rows();
  constexpr size_t kMaxBody = 4u << 20;
  ServeProcess server({"--model_name", "cancer", "--model_base_path", base.string(), "--max_body_bytes", std::to_string(kMaxBody),
                       "--access_log=false"});
  REQUIRE_MESSAGE(server.started(), server.log());
  const int port = server.port();
  const std::string predict = "/v1/models/cancer:predict";
  auto ref = http_call(port, "POST", predict, instances_body(rows, 0, 20));
  REQUIRE(ref.status == 200);
  for (int i = 0; i < 20; ++i) REQUIRE(http_call(port, "POST", predict, instances_body(rows, 0, 1 + i)).status == 200);
  long rss_start = server.rss_kb();

  PredictFuzzer fuzz(rows, kMaxBody, 20240611);
  auto t0 = std::chrono::steady_clock::now();
  std::map<int, int> codes;
  constexpr int kRequests = 10000;
  for (int i = 0; i < kRequests; ++i) {
    Mutant m = fuzz.next();
    Reply r;
    if (i % 100 == 99) {
      // Sizes at and past the limits, as the header announces them.
      static const char* kLengths[] = {"18446744073709551615", "18446744073709551616", "99999999999999999999999", "4194305", "-1"};
      std::string length = kLengths[fuzz.pick(5)];
      r.status = raw_status(port, "POST " + predict + " HTTP/1.1\r\nHost: x\r\nContent-Length: " + length + "\r\n\r\n{\"instances\": [[");
      INFO("request " << i << ": Content-Length " << length);
      CHECK((r.status == 400 || r.status == 413));
      ++codes[r.status];
      continue;
    }
    r = http_call(port, "POST", predict, m.body);
    ++codes[r.status];
    INFO("request " << i << " (" << std::string(m.what) << ", " << m.body.size() << " bytes): " << m.body.substr(0, 160) << " -> " << r.status << " "
                    << r.body.substr(0, 300) << r.error);
    if (m.want) CHECK(r.status == m.want);
    else CHECK((r.status == 200 || r.status == 400));
    if (r.status == 200) {
      auto doc = r.doc();
      CHECK((doc.is_object() && ((doc.contains("predictions") && doc["predictions"].is_array()) ||
                                 (doc.contains("outputs") && doc["outputs"].is_array()))));
    } else {
      auto doc = r.doc();
      CHECK((doc.is_object() && doc.contains("error") && doc["error"].is_string()));
      CHECK(r.body.size() < 4096);  // what the client sent is not echoed back whole
    }
    if (r.status == 0) REQUIRE_MESSAGE(server.running(), server.log());
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::string seen;
  for (auto& [code, n] : codes) seen += std::to_string(code) + ": " + std::to_string(n) + " ";
  // Still serving, with the same answers, and memory back near where it started.
  REQUIRE(server.running());
  auto after = http_call(port, "POST", predict, instances_body(rows, 0, 20));
  REQUIRE(after.status == 200);
  CHECK(after.body == ref.body);
  long rss_end = server.rss_kb();
  MESSAGE(kRequests << " fuzzed requests in " << seconds << " s (" << seen << "); server RSS " << rss_start << " kB before, " << rss_end
                    << " kB after");
  CHECK(codes[200] > kRequests / 10);
  CHECK(codes[400] > kRequests / 10);
#ifdef __SANITIZE_ADDRESS__
  constexpr long kSlackKiB = 256 * 1024 + 64 * 1024;  // ASan's quarantine of freed blocks
#else
  constexpr long kSlackKiB = 64 * 1024;
#endif
  CHECK(rss_end - rss_start <= kSlackKiB);
  CHECK(server.terminate(std::chrono::seconds(30)) == 0);
}
