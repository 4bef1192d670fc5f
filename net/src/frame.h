// Frames on a daemon connection: a 16-byte header, then a body of whole 8-byte words (a
// Cap'n Proto flat message, frame_messages.h). Header, little-endian:
//   magic "AFN1" | u16 type | u16 flags | u32 body length | u32 CRC-32C of the body
// With kFramePayload in flags, an 8-byte payload length follows the header, and that many
// payload bytes follow the body: the data of the tensors the body describes, in order
// (tensor_codec.h's split form). They are written from the tensors' own buffers and read
// into the receiving tensors' buffers, so a tensor crosses with no copy in user space;
// the CRC covers the body only (TCP, or TLS's MAC, guard the payload in transit).
// Everything here is pure (no sockets), so the reader can be fed hostile bytes in tests.
// The reader trusts nothing it has not checked: a length over the current limit fails
// before any body byte is stored, and a body's memory grows only as its bytes arrive, so
// a lying length costs the liar the bytes it actually sends. A payload's memory is the
// receiving tensors', allocated once the body describing them has arrived and checked;
// no frame before authentication may carry one.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "actorflow/status.h"

namespace actorflow::net {

inline constexpr size_t kFrameHeaderBytes = 16;
inline constexpr char kFrameMagic[4] = {'A', 'F', 'N', '1'};
// Before a peer has authenticated, no frame may be longer than this, and a connection
// reads no more than this in all: an unauthenticated peer cannot make us hold more. The
// largest genuine Hello (a task name of kMaxHelloText bytes) and AuthProof fit.
inline constexpr size_t kMaxPreAuthFrameBytes = 768;
// After authentication, the default of --max_message_bytes.
inline constexpr uint64_t kDefaultMaxMessageBytes = uint64_t{2} << 30;
inline constexpr uint16_t kFramePayload = 1;
inline constexpr size_t kPayloadLengthBytes = 8;

struct FrameHeader {
  uint16_t type = 0;
  uint16_t flags = 0;
  uint32_t length = 0;
  uint32_t crc = 0;
};

void write_frame_header(const FrameHeader& h, char out[kFrameHeaderBytes]);

// A header followed by `body`, with the body's CRC filled in; with payload_bytes > 0,
// the payload length after the header (the payload itself is written by the caller).
std::string encode_frame(uint16_t type, std::string_view body, uint64_t payload_bytes = 0);

// The bytes in front of a frame's body: the header, and with payload_bytes > 0 the
// payload length.
inline size_t frame_head_bytes(uint64_t payload_bytes) {
  return kFrameHeaderBytes + (payload_bytes ? kPayloadLengthBytes : 0);
}
// Writes the header (with the body's CRC) and the payload length in front of a body of
// `body_bytes` already at out + frame_head_bytes(payload_bytes): encode_frame without
// copying the body.
void write_frame_head(char* out, uint16_t type, size_t body_bytes, uint64_t payload_bytes);

// A frame to write: its header and body, then the payload tensors' bytes, gathered.
struct PayloadSpan {
  const char* data = nullptr;
  size_t size = 0;
};
struct OutFrame {
  std::string head;
  std::vector<PayloadSpan> payload;
  std::shared_ptr<const void> keep;  // owns the payload's memory until it is written
  uint64_t payload_bytes() const {
    uint64_t n = 0;
    for (auto& p : payload) n += p.size;
    return n;
  }
  // The bytes as a socket carries them, in one string (a copy: for tests and tools).
  std::string bytes() const {
    std::string out = head;
    for (auto& p : payload) out.append(p.data, p.size);
    return out;
  }
};

// One received frame. The body lives in 8-byte-aligned words, as Cap'n Proto readers need.
struct RawFrame {
  uint16_t type = 0;
  uint16_t flags = 0;
  std::vector<uint64_t> words;
  size_t size = 0;  // body bytes (a multiple of 8)
  uint64_t payload_bytes = 0;  // announced payload: the caller must place it (FrameReader)

  const char* data() const { return reinterpret_cast<const char*>(words.data()); }
  std::string_view body() const { return {data(), size}; }
};

// Where a payload lands: spans of memory the caller owns until payload_done.
struct PayloadTarget {
  char* data = nullptr;
  size_t size = 0;
};

// Cuts a byte stream into frames. Errors are data_loss (or resource_exhausted for an
// oversized claim) and sticky: after one, the connection is to be closed.
//
// A frame with a payload arrives in two events: first the frame (its body, and
// payload_bytes > 0), after which the caller must call place_payload with targets for
// exactly that many bytes before consuming more; then, once they are filled,
// payload_done() turns true (until the next consume).
class FrameReader {
 public:
  explicit FrameReader(uint64_t max_body_bytes = kMaxPreAuthFrameBytes) : max_body_(max_body_bytes) {}

  // The limit for frames whose header has not been read yet (raised after the handshake).
  // It bounds the body and the payload together. Payloads are refused until it is raised
  // (allow_payloads).
  void set_max_body_bytes(uint64_t n) { max_body_ = n; }
  uint64_t max_body_bytes() const { return max_body_; }
  void allow_payloads(bool yes) { payloads_allowed_ = yes; }

  // Consumes bytes from `data` up to the end of one frame (or its body, or its payload)
  // at most, so that the caller can change the limit between frames. Returns how many it
  // took; when a frame's body is complete, `*out` holds it.
  Result<size_t> consume(const char* data, size_t n, std::optional<RawFrame>* out);

  // The memory the announced payload goes to (sizes must add up to it).
  Status place_payload(std::vector<PayloadTarget> targets);
  // Where the next payload bytes go, for a caller that reads them there directly (empty
  // when no payload is being read); then payload_received(n).
  PayloadTarget payload_window() const;
  Status payload_received(size_t n);
  // True right after the last payload byte arrived.
  bool payload_done() const { return payload_done_; }

  // Bytes still missing from the frame being read (a header, or the rest of a body): a
  // careful caller reads no more than this before the peer is authenticated.
  size_t wanted() const;
  // True between frames: no partial header or body is buffered.
  bool idle() const { return header_have_ == 0 && !in_body_ && !in_payload_; }
  const Status& error() const { return error_; }

 private:
  Status fail(Status s);
  Status check_header();
  size_t header_size() const { return (hdr_.flags & kFramePayload) ? kFrameHeaderBytes + kPayloadLengthBytes : kFrameHeaderBytes; }
  void advance_payload(size_t n);

  uint64_t max_body_;
  bool payloads_allowed_ = false;
  char header_[kFrameHeaderBytes + kPayloadLengthBytes] = {};
  size_t header_have_ = 0;
  bool in_body_ = false;
  FrameHeader hdr_;
  uint64_t payload_bytes_ = 0;
  RawFrame body_;
  size_t body_have_ = 0;
  // The payload being read.
  bool awaiting_targets_ = false;
  bool in_payload_ = false;
  bool payload_done_ = false;
  std::vector<PayloadTarget> targets_;
  size_t target_ = 0;      // index into targets_
  size_t target_have_ = 0;  // bytes of targets_[target_] filled
  Status error_;
};

}  // namespace actorflow::net
