// Protobuf wire encoding by hand, the one writer and field reader shared by the event
// files (engine) and the tf.train.Example codec (actors): the messages are few and fixed,
// and a generated-code dependency would be larger than all of this.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace actorflow::pb {

enum WireType : int { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

class Writer {
 public:
  void varint(uint64_t v);
  void tag(int field, WireType wire) { varint(static_cast<uint64_t>(field) << 3 | static_cast<uint64_t>(wire)); }
  // int64, bool and enums are varints; negative int64 takes ten bytes, as protobuf does.
  void int_field(int field, int64_t v) { tag(field, kVarint); varint(static_cast<uint64_t>(v)); }
  void double_field(int field, double v);
  void float_field(int field, float v);
  void bytes_field(int field, std::string_view b);
  // Packed repeated fields; an empty list writes nothing, as protobuf does.
  void packed_doubles(int field, const std::vector<double>& v);
  void packed_floats(int field, const std::vector<double>& v);
  void packed_floats(int field, const std::vector<float>& v);
  void packed_ints(int field, const std::vector<int64_t>& v);
  const std::string& bytes() const { return out_; }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

// One field of a message as read back: varints in `value`, fixed64/fixed32 as raw bits
// in `value`, length-delimited payloads in `bytes` (a view into the message).
struct Field {
  int number = 0;
  WireType wire = kVarint;
  uint64_t value = 0;
  std::string_view bytes;
  double as_double() const;
  float as_float() const;
};
// Splits a message into its fields; false when it is malformed.
bool parse_fields(std::string_view message, std::vector<Field>* out);
// The payload of a packed repeated varint field; false when it is malformed.
bool parse_packed_varints(std::string_view payload, std::vector<uint64_t>* out);
// The payload of a packed repeated float field; false when its size is not a multiple of 4.
bool parse_packed_floats(std::string_view payload, std::vector<float>* out);

}  // namespace actorflow::pb
