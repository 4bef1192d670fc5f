// TFRecord framing, the one implementation shared by TensorBoard event files (engine) and
// the data readers' record files (actors): each record is
//   uint64 length, masked CRC-32C of those 8 bytes, data, masked CRC-32C of the data
// (all little-endian), the format of TensorFlow's TFRecordWriter.
#pragma once
#include "actorflow/api.h"
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "actorflow/status.h"

AF_PUBLIC_BEGIN

namespace actorflow::tfrecord {

// One record, framed.
std::string frame_record(std::string_view data);

// What lies at a byte offset of a record file.
struct RecordAt {
  enum class Problem { none, truncated_header, length_crc, truncated_data, data_crc } problem = Problem::none;
  std::string_view data;  // the payload when problem is none
  uint64_t length = 0;    // the length the header claims (once it is readable)
  size_t end = 0;         // offset just past the record when problem is none
  // "the length fails its CRC-32C check", ...; "" for none.
  std::string describe() const;
};
RecordAt record_at(std::string_view file, size_t offset);

// Whether a record header whose length passes its CRC starts at `offset`: how a reader
// that skips a corrupt record finds the next one.
bool header_intact(std::string_view file, size_t offset);

// Splits a whole file into records, checking every length and CRC; the error names
// `what` (e.g. "record file 'x'"), the record's number and its byte offset.
Result<std::vector<std::string>> split_records(std::string_view file, const std::string& what);
// "<what>: record <index> at byte offset <offset>: <problem>".
std::string record_error(const std::string& what, size_t index, size_t offset, const RecordAt& r);

}  // namespace actorflow::tfrecord

AF_PUBLIC_END
