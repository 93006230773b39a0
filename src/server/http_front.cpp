// HttpFront: the accept loop (connection limits, a thread per admitted connection), the
// per-connection request loop, and ConnectionStream, the httplib::Stream that hands cpp-httplib
// one normalized request from memory and writes its response to the socket.
#include "server/http_front.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>
#include <vector>

#include "core/log.h"
#include "server/http_read.h"

namespace mx::server {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr int kListenBacklog = 1024;   // cpp-httplib listens with 5: bursts of clients would wait for SYN retries
constexpr milliseconds kLinger{2000};  // after an error response, how long the client's rest is read and dropped
constexpr milliseconds kRefusedLinger{1000};  // the same for a connection refused at accept (read by the accept loop)
constexpr size_t kMaxRefusedLingering = 256;  // beyond: the oldest is closed at once
thread_local int t_client_fd = -1;     // the connection whose request this thread is handling

class ConnectionStream final : public httplib::Stream {
 public:
  ConnectionStream(int fd, const Peer& peer, std::string request, int write_timeout_s)
      : fd_(fd), peer_(peer), request_(std::move(request)), write_timeout_(seconds(write_timeout_s)) {}

  bool is_readable() const override { return pos_ < request_.size(); }
  bool is_writable() const override {
    pollfd p{.fd = fd_, .events = POLLOUT, .revents = 0};
    return ::poll(&p, 1, int(write_timeout_.count())) > 0 && (p.revents & POLLOUT) && !(p.revents & (POLLERR | POLLHUP));
  }
  ssize_t read(char* ptr, size_t size) override {
    const size_t n = std::min(size, request_.size() - pos_);
    std::memcpy(ptr, request_.data() + pos_, n);
    pos_ += n;
    return ssize_t(n);
  }
  ssize_t write(const char* ptr, size_t size) override {
    return send_all(fd_, std::string_view(ptr, size), write_timeout_) ? ssize_t(size) : -1;
  }
  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    ip = peer_.ip;
    port = peer_.port;
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    if (::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return;
    const Peer local = peer_of(addr);
    ip = local.ip;
    port = local.port;
  }
  socket_t socket() const override { return fd_; }

 private:
  int fd_;
  const Peer& peer_;
  std::string request_;
  size_t pos_ = 0;
  milliseconds write_timeout_;
};

// Each connection is a thread and a file descriptor: lift the soft open-file limit (often 1024)
// towards what --max-connections needs.
void raise_fd_limit(rlim_t want) {
  rlimit r{};
  if (::getrlimit(RLIMIT_NOFILE, &r) != 0 || r.rlim_cur >= want) return;
  r.rlim_cur = r.rlim_max == RLIM_INFINITY ? want : std::min(want, r.rlim_max);
  ::setrlimit(RLIMIT_NOFILE, &r);
  if (r.rlim_cur < want)
    log_warn("the open-file limit is {}: fewer connections than --max-connections can be accepted", r.rlim_cur);
}

}  // namespace

bool client_gone() {
  if (t_client_fd < 0) return false;
  pollfd p{.fd = t_client_fd, .events = POLLRDHUP, .revents = 0};
  return ::poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

HttpFront::HttpFront(const HttpLimits& limits)
    : limits_(limits), limiter_(limits.max_connections, limits.max_connections_per_client) {
  set_payload_max_length(limits.max_body_bytes);
  set_keep_alive_max_count(size_t(limits.max_requests_per_connection));
  set_keep_alive_timeout(limits.keep_alive_timeout_s);
}

HttpFront::~HttpFront() {
  stop_accepting();
  for (const Refused& r : refused_socks_) ::close(r.fd);
  refused_socks_.clear();
  draining_ = true;
  abort_connections();
  wait_connections();
  if (listen_fd_ >= 0) ::close(listen_fd_);
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

Result<int> HttpFront::bind(const std::string& host, int port) {
  const int bound = port == 0 ? bind_to_any_port(host) : (bind_to_port(host, port) ? port : -1);
  MX_CHECK(bound > 0, "could not bind to {}:{} (in use?)", host, port);
  listen_fd_ = svr_sock_;
  ::listen(listen_fd_, kListenBacklog);
  wake_fd_ = ::eventfd(0, EFD_CLOEXEC);
  MX_CHECK(wake_fd_ >= 0, "eventfd failed: {}", std::strerror(errno));
  raise_fd_limit(rlim_t(limits_.max_connections) + 64);
  accepting_ = true;
  return bound;
}

void HttpFront::run() {
  std::vector<pollfd> fds;
  while (accepting_) {
    fds.assign({{.fd = listen_fd_, .events = POLLIN, .revents = 0}, {.fd = wake_fd_, .events = POLLIN, .revents = 0}});
    for (const Refused& r : refused_socks_) fds.push_back({.fd = r.fd, .events = POLLIN, .revents = 0});
    if (::poll(fds.data(), fds.size(), refused_poll_timeout_ms()) < 0 && errno != EINTR) break;
    drain_refused(fds.data() + 2, fds.size() - 2);
    if (!accepting_ || !(fds[0].revents & POLLIN)) continue;
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    const int fd = ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len, SOCK_CLOEXEC);
    if (fd >= 0) {
      admit(fd, addr);
    } else if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
      std::this_thread::sleep_for(milliseconds(50));  // out of descriptors: let connections end
    }
  }
  ::close(listen_fd_);
  listen_fd_ = -1;
}

void HttpFront::stop_accepting() {
  if (!accepting_.exchange(false) || wake_fd_ < 0) return;
  const uint64_t one = 1;
  [[maybe_unused]] const ssize_t n = ::write(wake_fd_, &one, sizeof one);
}

void HttpFront::admit(int fd, const sockaddr_storage& addr) {
  const Peer peer = peer_of(addr);
  const ConnectionLimiter::Admit a = limiter_.admit(peer.key);
  if (a != ConnectionLimiter::Admit::Yes) {
    const HttpError e = a == ConnectionLimiter::Admit::TooManyTotal
        ? HttpError{503, fmt::format("The server has {} connections open, its limit (--max-connections).", limits_.max_connections)}
        : HttpError{429, fmt::format("Your address has {} connections open, the limit per client (--max-connections-per-client).",
                                     limits_.max_connections_per_client)};
    // One non-blocking write: the accept loop never waits on a refused client.
    send_all(fd, error_response(e), milliseconds(0));
    linger_refused(fd);
    ++refused_;
    if (Clock::now() - last_refusal_log_ > seconds(10)) {  // an attack must not flood the log
      log_warn("refused {} connection(s) (last from {}): HTTP {} {}", refused_, peer.ip, e.status, e.message);
      refused_ = 0;
      last_refusal_log_ = Clock::now();
    }
    return;
  }
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);  // SSE chunks go out at once
  {
    std::lock_guard lock(mu_);
    ++threads_;
    fds_.insert(fd);
  }
  auto done = [this, fd, key = peer.key] {
    limiter_.release(key);
    std::lock_guard lock(mu_);
    fds_.erase(fd);
    ::close(fd);  // under the lock: abort_connections never shuts down a reused descriptor
    --threads_;
    cv_.notify_all();
  };
  try {
    std::thread([this, fd, peer, done] {
      serve(fd, peer);
      done();
    }).detach();
  } catch (const std::system_error& e) {
    log_error("no thread for a connection from {}: {}", peer.ip, e.what());
    done();
  }
}

void HttpFront::linger_refused(int fd) {
  ::shutdown(fd, SHUT_WR);  // the answer is followed by a FIN; what the client sends is read below
  if (refused_socks_.size() >= kMaxRefusedLingering) {
    ::close(refused_socks_.front().fd);
    refused_socks_.pop_front();
  }
  refused_socks_.push_back({fd, Clock::now() + kRefusedLinger});
}

void HttpFront::drain_refused(const pollfd* polled, size_t count) {
  // `polled` lists refused_socks_ in order (taken before this call, which alone changes them).
  const auto now = Clock::now();
  std::deque<Refused> keep;
  char sink[4096];
  for (size_t i = 0; i < refused_socks_.size(); ++i) {
    const Refused r = refused_socks_[i];
    bool ended = now >= r.until;
    if (!ended && i < count && polled[i].revents) {
      ssize_t n = 0;
      while ((n = ::recv(r.fd, sink, sizeof sink, MSG_DONTWAIT)) > 0) {
      }
      ended = n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
    }
    if (ended) ::close(r.fd);
    else keep.push_back(r);
  }
  refused_socks_.swap(keep);
}

int HttpFront::refused_poll_timeout_ms() const {
  if (refused_socks_.empty()) return -1;
  const auto left = std::chrono::duration_cast<milliseconds>(refused_socks_.front().until - Clock::now());
  return int(std::clamp<int64_t>(left.count() + 1, 0, kRefusedLinger.count()));
}

void HttpFront::serve(int fd, const Peer& peer) {
  RequestReader reader(fd, limits_, draining_);
  for (int n = 0;; ++n) {
    IncomingRequest in = reader.next(n == 0);
    if (in.kind == IncomingRequest::Kind::Closed) break;
    if (in.kind == IncomingRequest::Kind::Error) {
      log_info("{}:{} - \"{} {} {}\" {} ({})", peer.ip, peer.port, in.method.empty() ? "-" : in.method, in.target,
               in.version, in.error.status, in.error.message);
      send_all(fd, error_response(in.error), seconds(limits_.write_timeout_s));
      linger(fd, kLinger);
      return;
    }
    ConnectionStream strm(fd, peer, std::move(in.bytes), limits_.write_timeout_s);
    const bool last = n + 1 >= limits_.max_requests_per_connection || draining_;
    bool closed = false;
    t_client_fd = fd;
    const bool ok = process_request(strm, last, closed, nullptr);
    t_client_fd = -1;
    if (!ok || closed || last) break;
  }
}

bool HttpFront::drain(milliseconds timeout) {
  draining_ = true;
  std::unique_lock lock(mu_);
  return cv_.wait_for(lock, timeout, [this] { return threads_ == 0; });
}

void HttpFront::abort_connections() {
  svr_sock_ = INVALID_SOCKET;  // cpp-httplib's test for "shutting down" in its streaming loop
  std::lock_guard lock(mu_);
  for (int fd : fds_) ::shutdown(fd, SHUT_RDWR);  // wakes every poll, fails every read and write
}

void HttpFront::wait_connections() {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [this] { return threads_ == 0; });
}

}  // namespace mx::server
