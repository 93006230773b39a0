// HttpLimits: what the HTTP front (http_front.h) accepts from a client before cpp-httplib sees a
// request — body and header sizes, deadlines, connections in total and per client address. Each
// field is a `mxserve serve` flag (docs/SERVING.md lists them).
#pragma once

#include <cstddef>

namespace mx::server {

struct HttpLimits {
  size_t max_body_bytes = 16u << 20;   // request body after de-chunking (--max-body-bytes); 413 beyond
  size_t max_header_bytes = 32u << 10;  // request line + header fields (--max-header-bytes); 431 beyond
  int header_timeout_s = 10;  // whole head must arrive within this (--header-timeout); 408 after
  int body_timeout_s = 60;    // whole body must arrive within this (--body-timeout); 408 after
  // An idle kept-alive connection is closed after this (--keep-alive-timeout), advertised to the
  // client in `Keep-Alive: timeout=N`. Longer than the pool expiry of common clients (undici 4 s,
  // httpx 5 s), so a client rarely reuses a connection the server is closing.
  int keep_alive_timeout_s = 30;
  int write_timeout_s = 30;      // a client that reads nothing for this long is dropped
  int max_connections = 1024;             // open at once, all clients (--max-connections); 503 beyond
  // open at once from one address / IPv6 /64; 429 beyond. Half the total: room for a benchmark at
  // concurrency 256 from one host (plus its kept-alive connections), none for one client to take all.
  int max_connections_per_client = 512;
  int max_requests_per_connection = 1000;  // kept-alive requests before the server closes
};

}  // namespace mx::server
