// HTTP/1.1 on Boost.Beast for the REST API: a strand per connection, keep-alive, a body
// limit (413), a read deadline for slow clients, an optional bearer token (401),
// admission control (429), one access-log line per request, and a drain on
// SIGTERM/SIGINT: stop accepting, answer the requests in flight, then return from run().
//
// The token, the body limit and admission are judged on the header, before a byte of
// the body is read: what a refused client sends costs the server nothing but the read
// that discards it.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include <actorflow/actorflow.h>

#include "metrics.h"
#include "rest_api.h"

namespace serve {

struct HttpOptions {
  std::string host = "127.0.0.1";
  int port = 8501;                      // 0: any free port
  uint64_t max_body_bytes = 16 << 20;   // larger bodies get 413
  std::string auth_token;               // "": no token asked for
  bool access_log = true;
  int io_threads = 2;
  int64_t read_timeout_ms = 30000;      // a request must arrive whole within this
  int64_t drain_timeout_ms = 30000;     // SIGTERM waits this long for requests in flight
  // Admission: a request is in flight from its header to its answer ready; past
  // either bound, a new one gets 429 at once. Bytes count what the headers announce
  // (a chunked body counts as max_body_bytes); one request is always let in.
  int64_t max_in_flight_requests = 128;
  uint64_t max_in_flight_bytes = 128ull << 20;
};

class HttpServer {
 public:
  HttpServer(HttpOptions options, RestApi& api, Metrics& metrics);
  ~HttpServer();
  // Binds and listens; the port is known afterwards.
  actorflow::Status listen();
  int port() const;
  // Serves until SIGTERM or SIGINT and the drain that follows; returns the number of
  // requests still in flight when it gave up waiting (0 after a clean drain).
  int64_t run();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace serve
