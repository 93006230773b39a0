// Server-sent events framing for the streaming endpoints.
#pragma once

#include <httplib.h>

#include <chrono>
#include <string>

namespace mx::server {

inline std::string sse_data(const std::string& payload) { return "data: " + payload + "\n\n"; }
inline std::string sse_event(const std::string& event, const std::string& payload) {
  return "event: " + event + "\ndata: " + payload + "\n\n";
}
// An SSE comment when nothing was sent for a second (clients ignore it): a stream whose request
// waits or produces hidden tokens still writes, so a client that left is noticed.
inline std::string keep_alive(std::chrono::steady_clock::time_point& last_write, bool nothing_to_send) {
  const auto now = std::chrono::steady_clock::now();
  if (!nothing_to_send) {
    last_write = now;
    return "";
  }
  if (now - last_write < std::chrono::seconds(1)) return "";
  last_write = now;
  return ": keep-alive\n\n";
}

inline void set_sse_headers(httplib::Response& res) {
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
}

}  // namespace mx::server
