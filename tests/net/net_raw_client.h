// A raw client of the node daemon over a plain socket, for tests that play a hostile
// peer: it writes any bytes, and reads and decodes frames by hand.
#pragma once
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <optional>
#include <string>
#include <vector>

#include "../../net/src/frame.h"
#include "../../net/src/frame_messages.h"
#include "../../net/src/handshake.h"
#include "loopback_socket.h"

namespace aftnet {

namespace af = actorflow;
namespace an = actorflow::net;

struct Socket {
  int fd = -1;
  explicit Socket(int port) : fd(aft::connect_loopback(port, 2)) {}
  ~Socket() {
    if (fd >= 0) ::close(fd);
  }
  bool write_all(const std::string& s) {
    size_t off = 0;
    while (off < s.size()) {
      ssize_t n = ::send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return false;
      off += static_cast<size_t>(n);
    }
    return true;
  }
  // The next message, or an error at EOF / timeout / bad bytes.
  af::Result<an::Message> read_message(an::FrameReader& reader) {
    char buf[512];
    for (;;) {
      size_t want = std::min(reader.wanted(), sizeof buf);
      ssize_t n = ::recv(fd, buf, want, 0);
      if (n <= 0) return af::Status(af::Code::unavailable, n == 0 ? "eof" : "timeout");
      std::optional<an::RawFrame> f;
      auto used = reader.consume(buf, static_cast<size_t>(n), &f);
      if (!used.ok()) return used.status();
      if (f) {
        std::vector<an::PayloadTarget> payload;
        return an::decode_message(*f, 1 << 20, &payload);
      }
    }
  }
  // True when the daemon closes its end within the receive timeout.
  bool closed_by_peer() {
    char buf[256];
    for (int i = 0; i < 64; ++i) {
      ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n == 0) return true;
      if (n < 0) return errno == ECONNRESET;
    }
    return false;
  }
};

// A genuine handshake over a plain socket, as `role` named `task`; true when the daemon
// welcomed us.
inline bool authenticate(Socket& s, const std::string& token, const std::string& task = "garbage",
                         const std::string& role = "client") {
  an::Handshake hs(an::Handshake::Side::client, {role, task, 1}, token, *an::random_nonce());
  if (!s.write_all(an::encode_message(hs.hello()).bytes())) return false;
  an::FrameReader reader;
  for (int i = 0; i < 4 && !hs.done(); ++i) {
    auto m = s.read_message(reader);
    if (!m.ok()) return false;
    auto replies = hs.on_message(*m);
    if (!replies.ok()) return false;
    for (auto& r : *replies)
      if (!s.write_all(an::encode_message(r).bytes())) return false;
  }
  return hs.done();
}

}  // namespace aftnet
