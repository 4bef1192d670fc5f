// Serialized tf.Summary protos: the public encoders over event_proto's, and the reader
// that merge_summaries and SummaryWriter::add_summary use to check what they are given.
#include <set>

#include "actorflow/summary.h"
#include "io/event_proto.h"

namespace actorflow {
namespace {

// Summary: value = 1. Value: tag = 1, simple_value = 2 (fixed32), then bytes fields
// obsolete_old_style_histogram = 3, image = 4, histo = 5, audio = 6, node_name = 7,
// tensor = 8, metadata = 9. Later field numbers are unknown to us and kept.
Status parse_value(std::string_view value, std::string* tag) {
  std::vector<pb::Field> fields;
  if (!pb::parse_fields(value, &fields)) return invalid_argument("a Summary.Value does not parse");
  tag->clear();
  for (const pb::Field& f : fields) {
    if (f.number == 2) {
      if (f.wire != pb::kFixed32) return invalid_argument("Summary.Value.simple_value is not a float");
      continue;
    }
    if (f.number > 9) continue;
    if (f.wire != pb::kLengthDelimited)
      return invalid_argument("Summary.Value field " + std::to_string(f.number) + " has the wrong wire type");
    if (f.number == 1) *tag = std::string(f.bytes);
    if (f.number == 5) {
      std::vector<pb::Field> histo;
      if (!pb::parse_fields(f.bytes, &histo)) return invalid_argument("Summary.Value.histo does not parse");
    }
  }
  return Status::OK();
}

// Calls fn(value bytes, tag) for each Value of a serialized Summary.
template <typename Fn>
Status for_each_value(std::string_view serialized, Fn&& fn) {
  std::vector<pb::Field> fields;
  if (!pb::parse_fields(serialized, &fields)) return invalid_argument("not a serialized tf.Summary (it does not parse)");
  for (const pb::Field& f : fields) {
    // A Summary has no other field: anything else means the bytes are something else.
    if (f.number != 1 || f.wire != pb::kLengthDelimited)
      return invalid_argument("not a serialized tf.Summary (field " + std::to_string(f.number) + ", wire type " +
                              std::to_string(f.wire) + ")");
    std::string tag;
    AF_RETURN_IF_ERROR(parse_value(f.bytes, &tag));
    AF_RETURN_IF_ERROR(fn(f.bytes, tag));
  }
  return Status::OK();
}

}  // namespace

std::string encode_scalar_summary(const std::string& tag, float value) { return pb::encode_scalar_summary(tag, value); }

Result<std::string> encode_histogram_summary(const std::string& tag, const Tensor& values) {
  AF_ASSIGN_OR_RETURN(pb::Histogram h, pb::make_histogram(tag, values));
  return pb::encode_histogram_summary(tag, h);
}

Result<std::vector<std::string>> summary_tags(std::string_view serialized) {
  std::vector<std::string> tags;
  AF_RETURN_IF_ERROR(for_each_value(serialized, [&](std::string_view, const std::string& tag) {
    tags.push_back(tag);
    return Status::OK();
  }));
  return tags;
}

Result<std::string> merge_summaries(const std::vector<std::string_view>& summaries) {
  pb::Writer out;
  std::set<std::string> seen;
  for (size_t i = 0; i < summaries.size(); ++i) {
    Status s = for_each_value(summaries[i], [&](std::string_view value, const std::string& tag) -> Status {
      if (!tag.empty() && !seen.insert(tag).second)
        return invalid_argument("duplicate tag '" + tag + "' in the summaries merged");
      out.bytes_field(1, value);
      return Status::OK();
    });
    if (!s.ok()) return s.with_context("summary input " + std::to_string(i));
  }
  return out.take();
}

}  // namespace actorflow
