// TFRecord framing: see actorflow/tfrecord.h.
#include <bit>
#include <cstring>

#include "actorflow/crc32c.h"
#include "actorflow/tfrecord.h"

namespace actorflow::tfrecord {

static_assert(std::endian::native == std::endian::little, "TFRecord lengths and CRCs are little-endian");

namespace {
uint64_t load_u64(const char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
uint32_t load_u32(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
constexpr size_t kHeader = 12, kFooter = 4;
}  // namespace

std::string frame_record(std::string_view data) {
  std::string out;
  out.reserve(data.size() + kHeader + kFooter);
  uint64_t n = data.size();
  char len[8];
  std::memcpy(len, &n, 8);
  uint32_t len_crc = crc32c_mask(crc32c(len, 8));
  uint32_t data_crc = crc32c_mask(crc32c(data));
  out.append(len, 8);
  out.append(reinterpret_cast<const char*>(&len_crc), 4);
  out.append(data);
  out.append(reinterpret_cast<const char*>(&data_crc), 4);
  return out;
}

bool header_intact(std::string_view file, size_t offset) {
  return offset <= file.size() && file.size() - offset >= kHeader &&
         crc32c_mask(crc32c(file.data() + offset, 8)) == load_u32(file.data() + offset + 8);
}

RecordAt record_at(std::string_view file, size_t offset) {
  using P = RecordAt::Problem;
  RecordAt r;
  if (offset > file.size() || file.size() - offset < kHeader) {
    r.problem = P::truncated_header;
    return r;
  }
  if (!header_intact(file, offset)) {
    r.problem = P::length_crc;
    return r;
  }
  r.length = load_u64(file.data() + offset);
  size_t room = file.size() - offset - kHeader;
  if (r.length > room || room - r.length < kFooter) {
    r.problem = P::truncated_data;
    return r;
  }
  std::string_view data = file.substr(offset + kHeader, r.length);
  if (crc32c_mask(crc32c(data)) != load_u32(data.data() + r.length)) {
    r.problem = P::data_crc;
    return r;
  }
  r.data = data;
  r.end = offset + kHeader + r.length + kFooter;
  return r;
}

std::string RecordAt::describe() const {
  switch (problem) {
    case Problem::none: return "";
    case Problem::truncated_header: return "is truncated (no room for its length and CRC)";
    case Problem::length_crc: return "the length fails its CRC-32C check";
    case Problem::truncated_data: return "is truncated: it claims " + std::to_string(length) + " bytes";
    case Problem::data_crc: return "the data fails its CRC-32C check";
  }
  return "";
}

std::string record_error(const std::string& what, size_t index, size_t offset, const RecordAt& r) {
  return what + ": record " + std::to_string(index) + " at byte offset " + std::to_string(offset) + ": " + r.describe();
}

Result<std::vector<std::string>> split_records(std::string_view file, const std::string& what) {
  std::vector<std::string> records;
  size_t pos = 0;
  while (pos < file.size()) {
    RecordAt r = record_at(file, pos);
    if (r.problem != RecordAt::Problem::none) return data_loss(record_error(what, records.size(), pos, r));
    records.emplace_back(r.data);
    pos = r.end;
  }
  return records;
}

}  // namespace actorflow::tfrecord
