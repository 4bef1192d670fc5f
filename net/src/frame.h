// Frames on a daemon connection: a 16-byte header, then a body of whole 8-byte words (a
// Cap'n Proto flat message, frame_messages.h). Header, little-endian:
//   magic "AFN1" | u16 type | u16 flags | u32 body length | u32 CRC-32C of the body
// Everything here is pure (no sockets), so the reader can be fed hostile bytes in tests.
// The reader trusts nothing it has not checked: a length over the current limit fails
// before any body byte is stored, and a body's memory grows only as its bytes arrive, so
// a lying length costs the liar the bytes it actually sends.
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
// Before a peer has authenticated, no frame may be longer than this: an unauthenticated
// peer cannot make us hold more.
inline constexpr size_t kMaxPreAuthFrameBytes = 4096;
// After authentication, the default of --max_message_bytes.
inline constexpr uint64_t kDefaultMaxMessageBytes = uint64_t{2} << 30;

struct FrameHeader {
  uint16_t type = 0;
  uint16_t flags = 0;
  uint32_t length = 0;
  uint32_t crc = 0;
};

void write_frame_header(const FrameHeader& h, char out[kFrameHeaderBytes]);

// A header followed by `body`, with the body's CRC filled in.
std::string encode_frame(uint16_t type, uint16_t flags, std::string_view body);

// One received frame. The body lives in 8-byte-aligned words, as Cap'n Proto readers need.
struct RawFrame {
  uint16_t type = 0;
  uint16_t flags = 0;
  std::vector<uint64_t> words;
  size_t size = 0;  // body bytes (a multiple of 8)

  const char* data() const { return reinterpret_cast<const char*>(words.data()); }
  std::string_view body() const { return {data(), size}; }
};

// Cuts a byte stream into frames. Errors are data_loss (or resource_exhausted for an
// oversized claim) and sticky: after one, the connection is to be closed.
class FrameReader {
 public:
  explicit FrameReader(uint64_t max_body_bytes = kMaxPreAuthFrameBytes) : max_body_(max_body_bytes) {}

  // The limit for frames whose header has not been read yet (raised after the handshake).
  void set_max_body_bytes(uint64_t n) { max_body_ = n; }
  uint64_t max_body_bytes() const { return max_body_; }

  // Consumes bytes from `data` up to the end of one frame at most, so that the caller
  // can change the limit between frames. Returns how many it took; when a frame is
  // complete, `*out` holds it.
  Result<size_t> consume(const char* data, size_t n, std::optional<RawFrame>* out);

  // Bytes still missing from the frame being read (a header, or the rest of a body): a
  // careful caller reads no more than this before the peer is authenticated.
  size_t wanted() const;
  // True between frames: no partial header or body is buffered.
  bool idle() const { return header_have_ == 0 && !in_body_; }
  const Status& error() const { return error_; }

 private:
  Status fail(Status s);
  Status check_header();

  uint64_t max_body_;
  char header_[kFrameHeaderBytes] = {};
  size_t header_have_ = 0;
  bool in_body_ = false;
  FrameHeader hdr_;
  RawFrame body_;
  size_t body_have_ = 0;
  Status error_;
};

}  // namespace actorflow::net
