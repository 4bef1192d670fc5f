// The HMAC-SHA256 challenge of handshake.h, on OpenSSL's libcrypto.
#include "handshake.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <cstring>

#include "log_escape.h"

namespace actorflow::net {
namespace {

// Length-prefixed, so no two different transcripts serialize to the same bytes.
void append_field(std::string& out, const std::string& s) {
  uint32_t n = static_cast<uint32_t>(s.size());
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  out += s;
}
void append_u64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void append_hello(std::string& out, const Identity& id, const std::string& nonce) {
  append_field(out, id.role);
  append_field(out, id.task);
  append_u64(out, id.incarnation);
  append_field(out, nonce);
}

}  // namespace

Result<std::string> random_nonce() {
  std::string n(kNonceBytes, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(n.data()), static_cast<int>(n.size())) != 1)
    return Status(Code::unavailable, "OpenSSL could not produce random bytes for a handshake nonce");
  return n;
}

uint64_t random_incarnation() {
  uint64_t v = 0;
  while (v == 0)
    if (RAND_bytes(reinterpret_cast<unsigned char*>(&v), sizeof v) != 1) v = 0x9e3779b97f4a7c15ull;
  return v;
}

std::string hmac_sha256(const std::string& key, const std::string& data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  // HMAC() with a null key pointer misbehaves on some OpenSSL versions; "" is a valid key.
  static const unsigned char empty = 0;
  const void* k = key.empty() ? static_cast<const void*>(&empty) : key.data();
  HMAC(EVP_sha256(), k, static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(data.data()), data.size(), out,
       &len);
  return std::string(reinterpret_cast<const char*>(out), len);
}

bool macs_equal(const std::string& a, const std::string& b) {
  if (a.size() != b.size() || a.empty()) return false;
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

Handshake::Handshake(Side side, Identity self, std::string token, std::string nonce, uint64_t max_message_bytes)
    : side_(side), self_(std::move(self)), token_(std::move(token)), nonce_(std::move(nonce)),
      max_message_bytes_(max_message_bytes) {}

HelloMsg Handshake::hello() const { return HelloMsg{kProtoVersion, self_.role, self_.task, self_.incarnation, nonce_}; }

Status Handshake::fail(const std::string& why) {
  state_ = State::failed;
  return Status(Code::unavailable, "handshake refused: " + why);
}

std::string Handshake::mac_for(Side prover) const {
  const bool we_are_client = side_ == Side::client;
  const Identity& client = we_are_client ? self_ : peer_;
  const Identity& daemon = we_are_client ? peer_ : self_;
  const std::string& client_nonce = we_are_client ? nonce_ : peer_nonce_;
  const std::string& daemon_nonce = we_are_client ? peer_nonce_ : nonce_;
  std::string transcript = prover == Side::client ? "actorflow-net-v1 client proof" : "actorflow-net-v1 daemon proof";
  append_u64(transcript, kProtoVersion);
  append_hello(transcript, client, client_nonce);
  append_hello(transcript, daemon, daemon_nonce);
  return hmac_sha256(token_, transcript);
}

Result<std::vector<Message>> Handshake::on_message(const Message& m) {
  if (state_ == State::failed) return fail("the handshake already failed");
  if (state_ == State::done) return fail("handshake message after authentication");
  if (auto* h = std::get_if<HelloMsg>(&m)) return on_hello(*h);
  if (auto* p = std::get_if<AuthProofMsg>(&m)) return on_proof(*p);
  if (auto* w = std::get_if<WelcomeMsg>(&m)) {
    if (side_ != Side::client || state_ != State::await_welcome)
      return fail("Welcome before the daemon proved it knows the cluster token");
    peer_max_ = w->max_message_bytes;
    state_ = State::done;
    return std::vector<Message>{};
  }
  return fail(std::string(message_name(m)) + " frame before authentication");
}

Result<std::vector<Message>> Handshake::on_hello(const HelloMsg& h) {
  if (state_ != State::await_hello) return fail("a second Hello");
  if (h.proto_version != kProtoVersion)
    return fail("peer speaks protocol version " + std::to_string(h.proto_version) + ", this build speaks " +
                std::to_string(kProtoVersion));
  // A daemon is dialed by clients and by peer daemons; a client dials daemons only.
  bool role_ok = side_ == Side::client ? h.role == "daemon" : (h.role == "client" || h.role == "daemon");
  if (!role_ok)
    return fail("peer's role is '" + escape_for_log(h.role, 32) + "', expected " +
                (side_ == Side::client ? "'daemon'" : "'client' or 'daemon'"));
  if (h.nonce.size() != kNonceBytes) return fail("peer's nonce is " + std::to_string(h.nonce.size()) + " bytes, not 32");
  if (macs_equal(h.nonce, nonce_)) return fail("peer echoed our own nonce");
  if (h.task.size() > kMaxHelloText) return fail("peer's task name is too long");
  peer_ = Identity{h.role, h.task, h.incarnation};
  peer_nonce_ = h.nonce;
  peer_version_ = h.proto_version;
  state_ = State::await_proof;
  if (side_ == Side::client) return std::vector<Message>{AuthProofMsg{mac_for(Side::client)}};
  return std::vector<Message>{};
}

Result<std::vector<Message>> Handshake::on_proof(const AuthProofMsg& p) {
  if (state_ != State::await_proof) return fail("AuthProof before Hello");
  Side prover = side_ == Side::client ? Side::daemon : Side::client;
  if (!macs_equal(p.mac, mac_for(prover)))
    return fail(side_ == Side::daemon ? "the client's proof does not match the cluster token (wrong ACTORFLOW_TOKEN?)"
                                      : "the daemon's proof does not match the cluster token (wrong ACTORFLOW_TOKEN?)");
  if (side_ == Side::client) {
    state_ = State::await_welcome;
    return std::vector<Message>{};
  }
  state_ = State::done;
  return std::vector<Message>{AuthProofMsg{mac_for(Side::daemon)}, WelcomeMsg{max_message_bytes_}};
}

}  // namespace actorflow::net
