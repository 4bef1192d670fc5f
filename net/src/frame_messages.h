// The messages of a daemon connection as plain C++ values, and their frames: one
// schemas/net.capnp Frame per frame body, the header's type naming the union member.
// Decoding checks everything a peer controls (sizes, the type, status codes) and turns
// any Cap'n Proto complaint into data_loss, so bad bytes cost the connection, never the
// process.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "actorflow/status.h"
#include "actorflow/tensor_codec.h"
#include "frame.h"

namespace actorflow::net {

// 2: a frame's tensors are TensorMsg structs in its message (1 nested them as bytes).
// 3: a daemon dialing a peer says role "daemon"; RegisterGraph names its container.
// 4: StoreRequest / StoreReply (a collective group's rendezvous store).
// 5: every RegisterGraph is a partition with a location (a daemon runs no whole graphs).
inline constexpr uint32_t kProtoVersion = 5;

struct HelloMsg {
  uint32_t proto_version = kProtoVersion;
  std::string role;  // "client", or "daemon" (a daemon, or a daemon dialing a peer)
  std::string task;
  uint64_t incarnation = 0;
  std::string nonce;
};
struct AuthProofMsg {
  std::string mac;
};
struct WelcomeMsg {
  uint64_t max_message_bytes = 0;
};
struct RegisterGraphMsg {
  uint64_t request_id = 0;
  std::string graph_def;
  // The partition's place and session, see net.capnp.
  std::string location;
  uint64_t session = 0;
  std::vector<std::pair<std::string, std::string>> peers;  // location -> "host:port"
  int32_t edge_capacity = 0;
  uint64_t variable_scope = 0;
  std::string container;  // not empty: a named container's variables, not the scope's
};
struct RegisteredMsg {
  uint64_t request_id = 0;
  uint64_t handle = 0;
  Status status;
};
struct RunStepMsg {
  uint64_t handle = 0;
  uint64_t step_id = 0;
  std::vector<std::pair<std::string, TensorMessage>> feeds;  // "node:index" -> value
  std::vector<std::string> fetches;
  std::vector<std::string> targets;
  int64_t timeout_ms = 0;
};
struct StepDoneMsg {
  uint64_t step_id = 0;
  Status status;
  std::vector<TensorMessage> fetched;  // in the order of RunStepMsg::fetches
};
struct CloseGraphMsg {
  uint64_t handle = 0;
};
struct HeartbeatMsg {
  int64_t sent_at_ms = 0;
};
struct EdgeFrameMsg {
  uint64_t session = 0;
  uint64_t step_id = 0;
  uint64_t edge = 0;
  std::string to_location;
  TensorMessage value;
};
struct CreditMsg {
  uint64_t session = 0;
  uint64_t edge = 0;
  std::string to_location;
};
struct CleanupStepMsg {
  uint64_t handle = 0;
  uint64_t step_id = 0;
  Status status;
};

struct ShutdownMsg {
  std::string reason;
};

// A collective group's rendezvous store (net.capnp): set, or get (not_found while absent).
struct StoreRequestMsg {
  uint64_t request_id = 0;
  bool set = false;
  bool erase_prefix = false;  // with set false: every key starting with `key` goes
  std::string space;
  std::string key;
  std::string value;
};
struct StoreReplyMsg {
  uint64_t request_id = 0;
  Status status;
  std::string value;
};

// The order matches the Frame union of net.capnp: the header's type is index + 1.
using Message = std::variant<HelloMsg, AuthProofMsg, WelcomeMsg, RegisterGraphMsg, RegisteredMsg, RunStepMsg,
                             StepDoneMsg, CloseGraphMsg, HeartbeatMsg, EdgeFrameMsg, CreditMsg, CleanupStepMsg,
                             ShutdownMsg, StoreRequestMsg, StoreReplyMsg>;

inline uint16_t frame_type(const Message& m) { return static_cast<uint16_t>(m.index() + 1); }
const char* message_name(const Message& m);

// The whole frame. Tensors of a RunStep, StepDone or Edge whose data can travel beside
// the body (tensor_codec.h's split form) go into the frame's payload, written from their
// own buffers (OutFrame::keep holds them).
OutFrame encode_message(const Message& m);
// Reads one frame's body; `max_bytes` bounds how much the Cap'n Proto reader traverses.
// The tensors whose data travels in the payload are allocated here, and `*payload` gets
// their memory, in payload order, for the frame reader to fill (FrameReader::place_payload);
// they add up to frame.payload_bytes, or the frame is refused.
Result<Message> decode_message(const RawFrame& frame, uint64_t max_bytes, std::vector<PayloadTarget>* payload);

}  // namespace actorflow::net
