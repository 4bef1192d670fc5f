// Per-socket TCP byte counters of this process (the kernel's tcp_info, read for every
// socket in /proc/self/fd), for measuring what a stretch of work put on the wire: sockets
// open at both ends count their difference, sockets opened in between count whole, and a
// socket closed in between takes nothing away.
#pragma once
#include "actorflow/api.h"
#include <cstdint>
#include <map>

#include "actorflow/net/collective.h"

AF_PUBLIC_BEGIN

namespace actorflow::net {

struct TcpSocketBytes {
  uint64_t acked = 0;     // bytes the peer acknowledged (sent)
  uint64_t received = 0;
};
// Every open TCP socket of this process, by its inode.
std::map<uint64_t, TcpSocketBytes> tcp_socket_bytes();
// What the sockets of `now` moved since `before`.
TcpBytes tcp_bytes_between(const std::map<uint64_t, TcpSocketBytes>& before, const std::map<uint64_t, TcpSocketBytes>& now);

}  // namespace actorflow::net

AF_PUBLIC_END
