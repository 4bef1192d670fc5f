// The cluster token every daemon and client share: from --token_file, ACTORFLOW_TOKEN or
// ACTORFLOW_TOKEN_FILE, in that order.
#pragma once
#include <map>
#include <string>

#include "actorflow/status.h"

namespace actorflow::net {

// What a daemon with no token tells the user.
inline constexpr const char* kNoTokenHelp =
    "no cluster token: set ACTORFLOW_TOKEN=<secret> (the same on every host), or "
    "ACTORFLOW_TOKEN_FILE=FILE, or pass --token_file FILE, or --insecure for a loopback-only test daemon";

// A shorter token is refused: a recorded handshake lets anyone test guesses offline.
inline constexpr size_t kMinTokenBytes = 16;
inline constexpr const char* kMakeTokenCommand = "export ACTORFLOW_TOKEN=$(head -c 32 /dev/urandom | base64)";

// OK, or invalid_argument naming `origin` and the command that makes a good token.
Status check_token(const std::string& token, const std::string& origin);

// The token from `token_file` (a flag; "" = none) or the environment. not_found with
// kNoTokenHelp when there is none; invalid_argument for an unreadable or empty file, or a
// token shorter than kMinTokenBytes.
// A file's trailing newline is not part of the token.
Result<std::string> load_token(const std::string& token_file, const std::map<std::string, std::string>& env);
// The same from this process's environment.
Result<std::string> load_token(const std::string& token_file = "");

}  // namespace actorflow::net
