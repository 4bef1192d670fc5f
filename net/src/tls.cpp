#include "tls.h"

#include <cstdlib>

namespace actorflow::net {

TlsFiles tls_files_from_env(const std::map<std::string, std::string>& env) {
  auto get = [&](const char* k) {
    auto it = env.find(k);
    return it == env.end() ? std::string() : it->second;
  };
  return {get("ACTORFLOW_TLS_CERT"), get("ACTORFLOW_TLS_KEY"), get("ACTORFLOW_TLS_CA")};
}

TlsFiles tls_files_from_env() {
  std::map<std::string, std::string> env;
  for (const char* k : {"ACTORFLOW_TLS_CERT", "ACTORFLOW_TLS_KEY", "ACTORFLOW_TLS_CA"})
    if (const char* v = std::getenv(k)) env[k] = v;
  return tls_files_from_env(env);
}

Result<std::shared_ptr<asio::ssl::context>> make_tls_context(const TlsFiles& files, bool server,
                                                             const std::string& where) {
  if (files.empty()) return std::shared_ptr<asio::ssl::context>();
  if (files.cert.empty() || files.key.empty() || files.ca.empty())
    return invalid_argument(where + ": TLS needs a certificate, its key and the cluster's CA together (got cert '" +
                            files.cert + "', key '" + files.key + "', ca '" + files.ca + "')");
  auto ctx = std::make_shared<asio::ssl::context>(server ? asio::ssl::context::tls_server : asio::ssl::context::tls_client);
  std::error_code ec;
  ctx->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 | asio::ssl::context::no_sslv3 |
                       asio::ssl::context::no_tlsv1 | asio::ssl::context::no_tlsv1_1,
                   ec);
  auto use = [&](const char* what, const std::string& file, auto&& load) -> Status {
    load(ec);
    if (ec) return invalid_argument(where + ": cannot use the TLS " + what + " '" + file + "': " + ec.message());
    return Status::OK();
  };
  AF_RETURN_IF_ERROR(use("certificate", files.cert, [&](std::error_code& e) { ctx->use_certificate_chain_file(files.cert, e); }));
  AF_RETURN_IF_ERROR(use("key", files.key, [&](std::error_code& e) { ctx->use_private_key_file(files.key, asio::ssl::context::pem, e); }));
  AF_RETURN_IF_ERROR(use("CA", files.ca, [&](std::error_code& e) { ctx->load_verify_file(files.ca, e); }));
  ctx->set_verify_mode(asio::ssl::verify_peer | asio::ssl::verify_fail_if_no_peer_cert, ec);
  if (ec) return invalid_argument(where + ": " + ec.message());
  return ctx;
}

Result<std::shared_ptr<asio::ssl::context>> client_tls_from_env() {
  // Read at every dial (dials are rare: once per partition), so a changed environment or
  // a renewed certificate takes effect without a restart.
  return make_tls_context(tls_files_from_env(), false, "ACTORFLOW_TLS_CERT/KEY/CA");
}

}  // namespace actorflow::net
