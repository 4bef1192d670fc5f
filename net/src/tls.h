// Optional TLS under the token handshake: every connection of a daemon and of
// its clients goes through asio::ssl with OpenSSL, both ends presenting a certificate
// signed by the cluster's CA and verifying the other's (mutual TLS). The HMAC handshake
// still runs inside it, so a leaked certificate alone does not admit a peer.
//
// Files come from the daemon's --tls_cert/--tls_key/--tls_ca, or for any process from
// ACTORFLOW_TLS_CERT, ACTORFLOW_TLS_KEY, ACTORFLOW_TLS_CA: all three or none.
#pragma once
#include <asio.hpp>
#include <asio/ssl.hpp>

#include <map>
#include <memory>
#include <string>

#include "actorflow/status.h"

namespace actorflow::net {

struct TlsFiles {
  std::string cert, key, ca;
  bool empty() const { return cert.empty() && key.empty() && ca.empty(); }
};

// The files from the environment (a map, so tests need no real variables).
TlsFiles tls_files_from_env(const std::map<std::string, std::string>& env);
TlsFiles tls_files_from_env();

// A context for one side (server: accepts; else dials) that presents `files.cert` and
// verifies the peer against `files.ca`. Null for empty files; an error naming the file
// and the flag or variable for a missing part or a file OpenSSL cannot use.
Result<std::shared_ptr<asio::ssl::context>> make_tls_context(const TlsFiles& files, bool server,
                                                             const std::string& where);

// The dialing side's context from ACTORFLOW_TLS_*; null without them.
Result<std::shared_ptr<asio::ssl::context>> client_tls_from_env();

}  // namespace actorflow::net
