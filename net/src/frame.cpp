// The frame header and the incremental reader (see frame.h for the format and why the
// reader grows a body only as its bytes arrive).
#include "frame.h"

#include <algorithm>
#include <cstring>

#include "actorflow/crc32c.h"

namespace actorflow::net {
namespace {

void put_u16(char* p, uint16_t v) {
  p[0] = static_cast<char>(v & 0xff);
  p[1] = static_cast<char>(v >> 8);
}
void put_u32(char* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}
uint16_t get_u16(const char* p) {
  return static_cast<uint16_t>(static_cast<uint8_t>(p[0]) | (static_cast<uint8_t>(p[1]) << 8));
}
uint32_t get_u32(const char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(static_cast<uint8_t>(p[i])) << (8 * i);
  return v;
}

// Grow a body's words in steps of at least this, doubling beyond: a peer claiming 2 GiB
// and sending 10 bytes makes us hold 64 KiB, not 2 GiB.
constexpr size_t kBodyGrowBytes = 64 * 1024;

}  // namespace

void write_frame_header(const FrameHeader& h, char out[kFrameHeaderBytes]) {
  std::memcpy(out, kFrameMagic, 4);
  put_u16(out + 4, h.type);
  put_u16(out + 6, h.flags);
  put_u32(out + 8, h.length);
  put_u32(out + 12, h.crc);
}

void write_frame_head(char* out, uint16_t type, size_t body_bytes, uint64_t payload_bytes) {
  uint16_t flags = payload_bytes ? kFramePayload : 0;
  const char* body = out + frame_head_bytes(payload_bytes);
  FrameHeader h{type, flags, static_cast<uint32_t>(body_bytes), crc32c(body, body_bytes)};
  write_frame_header(h, out);
  if (payload_bytes) {
    put_u32(out + kFrameHeaderBytes, static_cast<uint32_t>(payload_bytes));
    put_u32(out + kFrameHeaderBytes + 4, static_cast<uint32_t>(payload_bytes >> 32));
  }
}

std::string encode_frame(uint16_t type, std::string_view body, uint64_t payload_bytes) {
  size_t head = frame_head_bytes(payload_bytes);
  std::string out(head + body.size(), '\0');
  if (!body.empty()) std::memcpy(out.data() + head, body.data(), body.size());
  write_frame_head(out.data(), type, body.size(), payload_bytes);
  return out;
}

Status FrameReader::fail(Status s) {
  error_ = s;
  return s;
}

Status FrameReader::check_header() {
  if (std::memcmp(header_, kFrameMagic, 4) != 0) return data_loss("bad frame magic (not an ActorFlow daemon connection)");
  hdr_.type = get_u16(header_ + 4);
  hdr_.flags = get_u16(header_ + 6);
  hdr_.length = get_u32(header_ + 8);
  hdr_.crc = get_u32(header_ + 12);
  if (hdr_.flags & ~kFramePayload) return data_loss("frame header has unknown flags " + std::to_string(hdr_.flags));
  if ((hdr_.flags & kFramePayload) && !payloads_allowed_)
    return data_loss("a frame with a payload before the connection is authenticated");
  if (hdr_.length > max_body_)
    return resource_exhausted("frame of " + std::to_string(hdr_.length) + " bytes is over the limit of " +
                              std::to_string(max_body_) + " bytes");
  if (hdr_.length == 0 || hdr_.length % 8 != 0)
    return data_loss("frame length " + std::to_string(hdr_.length) + " is not a positive number of 8-byte words");
  return Status::OK();
}

size_t FrameReader::wanted() const {
  if (in_payload_) return targets_.empty() ? 0 : targets_[target_].size - target_have_;
  if (!in_body_) return (header_have_ < kFrameHeaderBytes ? kFrameHeaderBytes : header_size()) - header_have_;
  return hdr_.length - body_have_;
}

Status FrameReader::place_payload(std::vector<PayloadTarget> targets) {
  if (!error_.ok()) return error_;
  if (!awaiting_targets_) return fail(internal_error("place_payload without an announced payload"));
  uint64_t sum = 0;
  for (auto& t : targets) sum += t.size;
  if (sum != payload_bytes_)
    return fail(data_loss("the frame announces " + std::to_string(payload_bytes_) + " payload bytes but its body describes " +
                          std::to_string(sum)));
  awaiting_targets_ = false;
  targets_.clear();
  for (auto& t : targets)
    if (t.size) targets_.push_back(t);
  target_ = 0;
  target_have_ = 0;
  in_payload_ = true;
  advance_payload(0);
  return Status::OK();
}

void FrameReader::advance_payload(size_t n) {
  target_have_ += n;
  while (target_ < targets_.size() && target_have_ == targets_[target_].size) {
    ++target_;
    target_have_ = 0;
  }
  if (target_ == targets_.size()) {
    in_payload_ = false;
    payload_done_ = true;
    targets_.clear();
  }
}

PayloadTarget FrameReader::payload_window() const {
  if (!in_payload_ || !error_.ok()) return {};
  const auto& t = targets_[target_];
  return {t.data + target_have_, t.size - target_have_};
}

Status FrameReader::payload_received(size_t n) {
  if (!error_.ok()) return error_;
  payload_done_ = false;
  PayloadTarget w = payload_window();
  if (n > w.size) return fail(internal_error("payload_received past the window"));
  advance_payload(n);
  return Status::OK();
}

Result<size_t> FrameReader::consume(const char* data, size_t n, std::optional<RawFrame>* out) {
  out->reset();
  payload_done_ = false;
  if (!error_.ok()) return error_;
  if (awaiting_targets_) return fail(internal_error("bytes consumed before the payload was placed"));
  size_t used = 0;
  if (in_payload_) {
    while (used < n && in_payload_) {
      PayloadTarget w = payload_window();
      size_t take = std::min(n - used, w.size);
      std::memcpy(w.data, data + used, take);
      used += take;
      advance_payload(take);
    }
    return used;
  }
  if (!in_body_) {
    if (header_have_ < kFrameHeaderBytes) {
      size_t take = std::min(n, kFrameHeaderBytes - header_have_);
      std::memcpy(header_ + header_have_, data, take);
      header_have_ += take;
      used += take;
      if (header_have_ < kFrameHeaderBytes) return used;
      if (Status s = check_header(); !s.ok()) return fail(s);
    }
    if (header_have_ < header_size()) {
      size_t take = std::min(n - used, header_size() - header_have_);
      std::memcpy(header_ + header_have_, data + used, take);
      header_have_ += take;
      used += take;
      if (header_have_ < header_size()) return used;
    }
    payload_bytes_ = 0;
    if (hdr_.flags & kFramePayload) {
      payload_bytes_ = uint64_t{get_u32(header_ + kFrameHeaderBytes)} | (uint64_t{get_u32(header_ + kFrameHeaderBytes + 4)} << 32);
      if (payload_bytes_ == 0) return fail(data_loss("a frame flagged with a payload announces 0 payload bytes"));
      if (payload_bytes_ > max_body_ - hdr_.length)
        return fail(resource_exhausted("frame of " + std::to_string(hdr_.length) + " body and " +
                                       std::to_string(payload_bytes_) + " payload bytes is over the limit of " +
                                       std::to_string(max_body_) + " bytes"));
    }
    in_body_ = true;
    body_have_ = 0;
    body_ = RawFrame{};
    body_.type = hdr_.type;
    body_.flags = hdr_.flags;
    body_.size = hdr_.length;
  }
  size_t take = std::min(n - used, static_cast<size_t>(hdr_.length) - body_have_);
  if (take > 0) {
    size_t need_words = (body_have_ + take + 7) / 8;
    if (need_words > body_.words.size()) {
      size_t grow = std::max(kBodyGrowBytes, body_.words.size() * 8 * 2) / 8;
      size_t total_words = static_cast<size_t>(hdr_.length) / 8;
      body_.words.resize(std::min(total_words, std::max(need_words, grow)));
    }
    std::memcpy(reinterpret_cast<char*>(body_.words.data()) + body_have_, data + used, take);
    body_have_ += take;
    used += take;
  }
  if (body_have_ < hdr_.length) return used;
  uint32_t crc = crc32c(body_.data(), body_.size);
  if (crc != hdr_.crc) return fail(data_loss("frame body fails its CRC-32C check"));
  body_.payload_bytes = payload_bytes_;
  *out = std::move(body_);
  body_ = RawFrame{};
  in_body_ = false;
  header_have_ = 0;
  awaiting_targets_ = payload_bytes_ > 0;
  return used;
}

}  // namespace actorflow::net
