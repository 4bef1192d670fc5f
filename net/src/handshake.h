// Mutual authentication of a daemon connection, as a pure state machine (no sockets):
//
//   client -> Hello{client, nonce_c}      daemon -> Hello{daemon, nonce_d}
//   client -> AuthProof{mac_c}            daemon checks mac_c, then
//                                         daemon -> AuthProof{mac_d}, Welcome
//   client checks mac_d, accepts Welcome.
//
// mac = HMAC-SHA256(token, label || both Hellos), the label saying which side proves, so
// one side's proof is never valid for the other. Both Hellos carry fresh 32-byte nonces,
// so a recorded handshake replayed to a daemon fails: the daemon's nonce differs. Role,
// task and incarnation are inside the MAC, so they cannot be altered in flight. MACs are
// compared in constant time. An empty token (a daemon started with --insecure and a
// client with no token) still runs the same exchange.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "actorflow/status.h"
#include "frame_messages.h"

namespace actorflow::net {

inline constexpr size_t kNonceBytes = 32;
// Hello strings longer than this are refused (the whole pre-auth exchange stays small).
inline constexpr size_t kMaxHelloText = 256;

struct Identity {
  std::string role;  // "client" or "daemon"
  std::string task;
  uint64_t incarnation = 0;
};

// 32 bytes from OpenSSL's CSPRNG; unavailable if it fails.
Result<std::string> random_nonce();
// A random 64-bit incarnation for this process start (never 0).
uint64_t random_incarnation();
std::string hmac_sha256(const std::string& key, const std::string& data);
// Constant-time equality of two MACs (CRYPTO_memcmp); false when sizes differ.
bool macs_equal(const std::string& a, const std::string& b);

class Handshake {
 public:
  enum class Side { client, daemon };

  // `nonce` must be fresh (random_nonce()); `max_message_bytes` is what a daemon's
  // Welcome announces.
  Handshake(Side side, Identity self, std::string token, std::string nonce, uint64_t max_message_bytes = 0);

  // The first frame to send, at once, by either side.
  HelloMsg hello() const;
  // Feeds one message received before authentication; returns the messages to send in
  // reply. An error (unauthenticated: permission is not a code here, so unavailable
  // with the reason) means: close the connection.
  Result<std::vector<Message>> on_message(const Message& m);

  bool done() const { return state_ == State::done; }
  const Identity& peer() const { return peer_; }
  // The limit the daemon announced (client side, after done()).
  uint64_t peer_max_message_bytes() const { return peer_max_; }

 private:
  enum class State { await_hello, await_proof, await_welcome, done, failed };
  Result<std::vector<Message>> on_hello(const HelloMsg& h);
  Result<std::vector<Message>> on_proof(const AuthProofMsg& p);
  Status fail(const std::string& why);
  std::string mac_for(Side prover) const;

  Side side_;
  Identity self_;
  std::string token_;
  std::string nonce_;
  uint64_t max_message_bytes_;
  State state_ = State::await_hello;
  Identity peer_;
  std::string peer_nonce_;
  uint32_t peer_version_ = 0;
  uint64_t peer_max_ = 0;
};

}  // namespace actorflow::net
