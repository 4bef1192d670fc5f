// Reading the cluster token (token.h).
#include "token.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

namespace actorflow::net {
namespace {

Result<std::string> read_token_file(const std::string& path, const std::string& origin) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return invalid_argument(origin + ": cannot read the token file '" + path + "'");
  std::ostringstream ss;
  ss << in.rdbuf();
  std::string t = ss.str();
  while (!t.empty() && (t.back() == '\n' || t.back() == '\r')) t.pop_back();
  if (t.empty()) return invalid_argument(origin + ": the token file '" + path + "' is empty");
  return t;
}

Result<std::string> checked(Result<std::string> token, const std::string& origin) {
  if (token.ok()) AF_RETURN_IF_ERROR(check_token(*token, origin));
  return token;
}

}  // namespace

Status check_token(const std::string& token, const std::string& origin) {
  if (token.size() >= kMinTokenBytes) return Status::OK();
  return invalid_argument(origin + ": the cluster token is " + std::to_string(token.size()) + " bytes; at least " +
                          std::to_string(kMinTokenBytes) + " are needed. Make one with: " + kMakeTokenCommand);
}

Result<std::string> load_token(const std::string& token_file, const std::map<std::string, std::string>& env) {
  if (!token_file.empty()) return checked(read_token_file(token_file, "--token_file"), "--token_file " + token_file);
  if (auto it = env.find("ACTORFLOW_TOKEN"); it != env.end() && !it->second.empty())
    return checked(it->second, "ACTORFLOW_TOKEN");
  if (auto it = env.find("ACTORFLOW_TOKEN_FILE"); it != env.end() && !it->second.empty())
    return checked(read_token_file(it->second, "ACTORFLOW_TOKEN_FILE"), "ACTORFLOW_TOKEN_FILE " + it->second);
  return not_found(kNoTokenHelp);
}

Result<std::string> load_token(const std::string& token_file) {
  std::map<std::string, std::string> env;
  for (const char* name : {"ACTORFLOW_TOKEN", "ACTORFLOW_TOKEN_FILE"})
    if (const char* v = std::getenv(name)) env[name] = v;
  return load_token(token_file, env);
}

}  // namespace actorflow::net
