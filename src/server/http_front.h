// HttpFront: cpp-httplib's Server with our own accept loop and connection handling in front of
// it. cpp-httplib (Debian's 0.11) reads requests with a per-read timeout only, trusts chunked
// bodies and Content-Encoding past the payload limit, drops pipelined requests and lets slow
// clients hold every worker thread. Here each connection is counted (in total and per client
// address) and gets its own thread; its requests are read and checked by RequestReader
// (http_read.h) under deadlines and limits, and only a complete, normalized request is handed
// to cpp-httplib's process_request for routing and the response.
#pragma once

#include <httplib.h>
#include <poll.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <set>
#include <string>

#include "core/status.h"
#include "server/connection_limiter.h"
#include "server/http_limits.h"

namespace mx::server {

class HttpFront : public httplib::Server {
 public:
  explicit HttpFront(const HttpLimits& limits);
  ~HttpFront() override;

  // Binds host:port (port 0: a free one); returns the port.
  Result<int> bind(const std::string& host, int port);
  // Accepts connections until stop_accepting(); blocks.
  void run();
  void stop_accepting();
  // Closes idle connections and kept-alive ones after their current response; waits up to
  // `timeout` for all to end. True when none is left.
  bool drain(std::chrono::milliseconds timeout);
  // Ends every connection now: streaming responses stop, reads and writes fail.
  void abort_connections();
  // Waits for every connection thread to end.
  void wait_connections();
  int open_connections() const { return limiter_.open(); }

 private:
  using Clock = std::chrono::steady_clock;
  void admit(int fd, const sockaddr_storage& addr);
  void serve(int fd, const Peer& peer);
  // Refused connections (503/429 written, write side shut) stay open a moment while the accept
  // loop reads and drops what the client still sends: closing with unread bytes would reset the
  // connection and the client could lose the answer. Accept thread only.
  struct Refused {
    int fd;
    Clock::time_point until;
  };
  void linger_refused(int fd);
  void drain_refused(const ::pollfd* polled, size_t count);  // reads the polled ones, closes ended/expired
  int refused_poll_timeout_ms() const;
  std::deque<Refused> refused_socks_;

  const HttpLimits limits_;
  ConnectionLimiter limiter_;
  int listen_fd_ = -1;
  int wake_fd_ = -1;  // eventfd: wakes run() for stop_accepting()
  std::atomic<bool> accepting_{false}, draining_{false};
  std::mutex mu_;  // guards threads_, fds_
  std::condition_variable cv_;
  int threads_ = 0;
  std::set<int> fds_;  // the connections being served (shut down by abort_connections)
  int refused_ = 0;  // accept thread only: refusals since the last log line
  Clock::time_point last_refusal_log_{};
};

// Whether the client of the request being handled on this thread has closed its connection
// (checked by handlers that compute for a while before writing anything).
bool client_gone();

}  // namespace mx::server
