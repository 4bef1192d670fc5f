// Protobuf wire encoding: see actorflow/protobuf_wire.h.
#include <bit>
#include <cstring>

#include "actorflow/protobuf_wire.h"

namespace actorflow::pb {

static_assert(std::endian::native == std::endian::little, "fixed-width protobuf fields are little-endian");

void Writer::varint(uint64_t v) {
  while (v >= 0x80) {
    out_.push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  out_.push_back(static_cast<char>(v));
}

void Writer::double_field(int field, double v) {
  tag(field, kFixed64);
  out_.append(reinterpret_cast<const char*>(&v), 8);
}

void Writer::float_field(int field, float v) {
  tag(field, kFixed32);
  out_.append(reinterpret_cast<const char*>(&v), 4);
}

void Writer::bytes_field(int field, std::string_view b) {
  tag(field, kLengthDelimited);
  varint(b.size());
  out_.append(b);
}

void Writer::packed_doubles(int field, const std::vector<double>& v) {
  if (v.empty()) return;
  tag(field, kLengthDelimited);
  varint(v.size() * 8);
  out_.append(reinterpret_cast<const char*>(v.data()), v.size() * 8);
}

void Writer::packed_floats(int field, const std::vector<double>& v) {
  if (v.empty()) return;
  tag(field, kLengthDelimited);
  varint(v.size() * 4);
  for (double d : v) {
    float f = static_cast<float>(d);
    out_.append(reinterpret_cast<const char*>(&f), 4);
  }
}

void Writer::packed_floats(int field, const std::vector<float>& v) {
  if (v.empty()) return;
  tag(field, kLengthDelimited);
  varint(v.size() * 4);
  out_.append(reinterpret_cast<const char*>(v.data()), v.size() * 4);
}

void Writer::packed_ints(int field, const std::vector<int64_t>& v) {
  if (v.empty()) return;
  Writer inner;
  for (int64_t x : v) inner.varint(static_cast<uint64_t>(x));
  bytes_field(field, inner.bytes());
}

double Field::as_double() const { return std::bit_cast<double>(value); }
float Field::as_float() const { return std::bit_cast<float>(static_cast<uint32_t>(value)); }

namespace {
bool read_varint(std::string_view s, size_t* pos, uint64_t* out) {
  uint64_t v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (*pos >= s.size()) return false;
    auto b = static_cast<unsigned char>(s[(*pos)++]);
    v |= static_cast<uint64_t>(b & 0x7f) << shift;
    if (!(b & 0x80)) {
      *out = v;
      return true;
    }
  }
  return false;
}
}  // namespace

bool parse_packed_varints(std::string_view payload, std::vector<uint64_t>* out) {
  size_t pos = 0;
  while (pos < payload.size()) {
    uint64_t v;
    if (!read_varint(payload, &pos, &v)) return false;
    out->push_back(v);
  }
  return true;
}

bool parse_packed_floats(std::string_view payload, std::vector<float>* out) {
  if (payload.size() % 4 != 0) return false;
  size_t n = payload.size() / 4, old = out->size();
  out->resize(old + n);
  if (n) std::memcpy(out->data() + old, payload.data(), payload.size());
  return true;
}

bool parse_fields(std::string_view m, std::vector<Field>* out) {
  size_t pos = 0;
  while (pos < m.size()) {
    uint64_t key;
    if (!read_varint(m, &pos, &key)) return false;
    Field f;
    f.number = static_cast<int>(key >> 3);
    f.wire = static_cast<WireType>(key & 7);
    if (f.number <= 0) return false;
    switch (f.wire) {
      case kVarint:
        if (!read_varint(m, &pos, &f.value)) return false;
        break;
      case kFixed64:
        if (m.size() - pos < 8) return false;
        std::memcpy(&f.value, m.data() + pos, 8);
        pos += 8;
        break;
      case kFixed32: {
        if (m.size() - pos < 4) return false;
        uint32_t v;
        std::memcpy(&v, m.data() + pos, 4);
        f.value = v;
        pos += 4;
        break;
      }
      case kLengthDelimited: {
        uint64_t n;
        if (!read_varint(m, &pos, &n) || n > m.size() - pos) return false;
        f.bytes = m.substr(pos, n);
        pos += n;
        break;
      }
      default:
        return false;
    }
    out->push_back(f);
  }
  return true;
}

}  // namespace actorflow::pb
