#include "instances_reader.h"

#include <bit>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

namespace serve {

namespace af = actorflow;

namespace {

// Powers of ten a double holds exactly.
constexpr double kPow10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                             1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

bool is_digit(char c) { return c >= '0' && c <= '9'; }

constexpr uint64_t kPow10Int[] = {1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000};
constexpr uint64_t kZeros = 0x3030303030303030ull;  // "00000000"
constexpr uint64_t kZeroCommas = 0x2c302c302c302c30ull;  // "0,0,0,0," in memory order

// How many of the eight characters in v (the first in the lowest byte) are digits before
// the first that is not. A byte is a digit when, xor '0', it is 0..9: its high nibble is 0
// and adding 6 leaves it so. A byte that is not carries at most into the bytes after it.
int leading_digits(uint64_t v) {
  uint64_t x = v ^ kZeros;
  uint64_t other = (x | (x + 0x0606060606060606ull)) & 0xF0F0F0F0F0F0F0F0ull;
  return other == 0 ? 8 : std::countr_zero(other) / 8;
}

// The value of eight digit characters, the first the most significant: pairs, then
// fours, then the eight, each step one multiplication over all lanes at once.
uint64_t eight_digits(uint64_t v) {
  v -= kZeros;
  v = v * 10 + (v >> 8);  // each even byte: its pair's value
  return ((v & 0x000000FF000000FFull) * (100 + (1000000ull << 32)) +
          ((v >> 16) & 0x000000FF000000FFull) * (1 + (10000ull << 32))) >> 32;
}

// Reads the run of digits at p into m (digits counts them); false once more than 19 are
// significant, which a uint64 cannot hold (p still moves past the whole run).
bool digit_run(const char*& p, const char* end, uint64_t& m, int& digits) {
  // Eight bytes at a time where the body has them and m has room for eight more digits:
  // a pixel's "0.0117647" is one load, one test and three multiplications, not a loop
  // per character (in profiles the scan was the server's largest part of a request).
  if constexpr (std::endian::native == std::endian::little) {
    while (end - p >= 8 && digits <= 11) {
      uint64_t v;
      std::memcpy(&v, p, 8);
      int n = leading_digits(v);
      if (n == 0) return true;
      // n digits read as eight: the digits moved to the top, '0's below them.
      if (n < 8) v = (v << (8 * (8 - n))) | (kZeros >> (8 * n));
      m = m * kPow10Int[n] + eight_digits(v);
      digits += n;
      p += n;
      if (n < 8) return true;
    }
  }
  bool kept = true;
  for (; p < end && is_digit(*p); ++p, ++digits)
    if (digits < 19) m = m * 10 + static_cast<uint64_t>(*p - '0');
    else kept = false;
  return kept;
}

// One pass over the body, strict JSON for the few tokens this form has; anything else
// ends the scan (false), and the caller falls back to the general reader.
template <typename T>
class Scanner {
 public:
  Scanner(std::string_view body, std::vector<int64_t>& dims, std::vector<T>& out)
      : p_(body.data()), end_(body.data() + body.size()), dims_(dims), out_(out) {}

  // {"instances": [row, ...]}, and only blanks after it; `rows` is how many rows.
  bool document(int64_t* rows) {
    if (!take('{') || !take('"')) return false;
    constexpr std::string_view key = "instances\"";
    if (static_cast<size_t>(end_ - p_) < key.size() || std::memcmp(p_, key.data(), key.size()) != 0) return false;
    p_ += key.size();
    if (!take(':') || !take('[')) return false;
    *rows = 0;
    if (peek() == ']') return false;  // no rows: the general reader words that error
    do {
      if (!level(0)) return false;
      ++*rows;
    } while (take(','));
    // Another key after the list (signature_name, a repeated "instances") is the general
    // reader's to judge.
    if (!take(']') || !take('}')) return false;
    blanks();
    return p_ == end_;
  }

 private:
  void blanks() {
    while (p_ < end_ && (*p_ == ' ' || *p_ == '\n' || *p_ == '\r' || *p_ == '\t')) ++p_;
  }
  char peek() {
    blanks();
    return p_ < end_ ? *p_ : '\0';
  }
  bool take(char c) {
    if (peek() != c) return false;
    ++p_;
    return true;
  }

  // The values of one row, or of a list inside it, at `at` of the row's dims.
  bool level(size_t at) {
    if (at == dims_.size()) return value();
    if (!take('[')) return false;
    int64_t n = 0;
    if (peek() != ']') {
      if (at + 1 == dims_.size()) {
        if (!numbers(&n)) return false;
      } else {
        do {
          if (!level(at + 1)) return false;
          ++n;
        } while (take(','));
      }
    }
    if (!take(']')) return false;
    // An unknown dimension takes the first row's size, as the general reader does.
    if (dims_[at] < 0) dims_[at] = n;
    return n == dims_[at];
  }

  // The innermost list's numbers, most of a body: "n, n, ..." up to (not past) its ']'.
  bool numbers(int64_t* n) {
    while (true) {
      // Eight plain zeros with their commas ("0,0,0,0,0,0,0,0,"), a run of blank pixels,
      // in two compares: a value that ends the run, or breaks it, goes the way below.
      if constexpr (std::endian::native == std::endian::little) {
        while (end_ - p_ >= 16) {
          uint64_t a, b;
          std::memcpy(&a, p_, 8);
          std::memcpy(&b, p_ + 8, 8);
          if ((a ^ kZeroCommas) | (b ^ kZeroCommas)) break;
          out_.resize(out_.size() + 8);
          *n += 8;
          p_ += 16;
        }
      }
      // A plain 0, most of an image's pixels, without the general path.
      if (end_ - p_ >= 2 && p_[0] == '0' && (p_[1] == ',' || p_[1] == ']')) {
        out_.push_back(T(0));
        ++p_;
      } else if (!value()) {
        return false;
      }
      ++*n;
      blanks();
      if (p_ < end_ && *p_ == ',') {
        ++p_;
        blanks();
        continue;
      }
      return p_ < end_ && *p_ == ']';
    }
  }

  // A JSON number, read as the general reader reads every number for a float input:
  // through double, correctly rounded, then to T.
  bool value() {
    blanks();
    const char* p = p_;
    const char* const end = end_;
    const char* start = p;
    bool negative = p < end && *p == '-';
    if (negative) ++p;
    // The integer part: 0, or digits without a leading 0.
    if (p == end || !is_digit(*p)) return false;
    uint64_t mantissa = 0;
    int digits = 0, exponent = 0;
    bool kept = true;  // every significant digit is in `mantissa`
    if (*p == '0') ++p;
    else kept = digit_run(p, end, mantissa, digits);
    if (p < end && *p == '.') {
      ++p;
      if (p == end || !is_digit(*p)) return false;
      if (mantissa == 0)
        for (; p < end && *p == '0'; ++p) --exponent;  // a fraction's leading zeros: scale only
      int before = digits;
      kept = digit_run(p, end, mantissa, digits) && kept;
      exponent -= digits - before;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
      ++p;
      bool minus = p < end && (*p == '-' || *p == '+') && *p++ == '-';
      if (p == end || !is_digit(*p)) return false;
      int e = 0;
      for (; p < end && is_digit(*p); ++p)
        if (e < 100000) e = e * 10 + (*p - '0');
      exponent += minus ? -e : e;
    }
    p_ = p;
    double x;
    if (kept && mantissa == 0) {
      // A negative zero: the general reader reads "-0" as the integer 0, so it settles which.
      if (negative) return false;
      x = 0;
    } else if (kept && mantissa <= (uint64_t{1} << 53) && exponent >= -22 && exponent <= 22) {
      // Clinger's fast path: both factors are exact doubles, so one operation rounds once.
      x = static_cast<double>(mantissa);
      x = exponent < 0 ? x / kPow10[-exponent] : x * kPow10[exponent];
      if (negative) x = -x;
    } else {
      // Long mantissas, large exponents: the library's correctly rounded conversion.
      auto r = std::from_chars(start, p, x);
      if (r.ec != std::errc() || r.ptr != p) return false;  // out of a double's range
    }
    out_.push_back(static_cast<T>(x));
    return true;
  }

  const char* p_;
  const char* end_;
  std::vector<int64_t>& dims_;
  std::vector<T>& out_;
};

template <typename T>
std::optional<af::Tensor> read(std::string_view body, const TensorSpec& input) {
  // The values go into a vector this thread keeps (no allocation once grown), then once
  // into the tensor when the row count is known.
  thread_local std::vector<T> values;
  values.clear();
  std::vector<int64_t> dims(input.shape.dims().begin() + 1, input.shape.dims().end());
  int64_t rows = 0;
  Scanner<T> scan(body, dims, values);
  bool ok = scan.document(&rows);
  std::optional<af::Tensor> out;
  if (ok && rows > 0) {
    std::vector<int64_t> shape{rows};
    shape.insert(shape.end(), dims.begin(), dims.end());
    af::Tensor t(input.dtype, af::Shape(shape));
    if (static_cast<int64_t>(values.size()) == t.num_elements()) {
      std::memcpy(t.raw_data(), values.data(), values.size() * sizeof(T));
      out = std::move(t);
    }
  }
  // A large body's values are not kept for the next request.
  if (values.capacity() * sizeof(T) > (size_t{1} << 20)) std::vector<T>().swap(values);
  return out;
}

}  // namespace

std::optional<af::Tensor> read_float_instances(std::string_view body, const TensorSpec& input) {
  if (!input.shape.has_rank() || input.shape.rank() < 1) return std::nullopt;
  if (input.dtype == af::DType::f32) return read<float>(body, input);
  if (input.dtype == af::DType::f64) return read<double>(body, input);
  return std::nullopt;
}

}  // namespace serve
