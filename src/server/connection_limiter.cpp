// Connection counting per client key, and the key of a socket address.
#include "server/connection_limiter.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstring>

namespace mx::server {

Peer peer_of(const sockaddr_storage& addr) {
  char text[INET6_ADDRSTRLEN] = {};
  Peer p;
  if (addr.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&addr);
    inet_ntop(AF_INET, &a->sin_addr, text, sizeof text);
    p.ip = p.key = text;
    p.port = ntohs(a->sin_port);
    return p;
  }
  if (addr.ss_family != AF_INET6) return {.ip = "unknown", .port = 0, .key = "unknown"};
  const auto* a = reinterpret_cast<const sockaddr_in6*>(&addr);
  p.port = ntohs(a->sin6_port);
  if (IN6_IS_ADDR_V4MAPPED(&a->sin6_addr)) {  // ::ffff:1.2.3.4 is the IPv4 client 1.2.3.4
    inet_ntop(AF_INET, &a->sin6_addr.s6_addr[12], text, sizeof text);
    p.ip = p.key = text;
    return p;
  }
  inet_ntop(AF_INET6, &a->sin6_addr, text, sizeof text);
  p.ip = text;
  in6_addr prefix{};
  std::memcpy(prefix.s6_addr, a->sin6_addr.s6_addr, 8);
  inet_ntop(AF_INET6, &prefix, text, sizeof text);
  p.key = std::string(text) + "/64";
  return p;
}

ConnectionLimiter::Admit ConnectionLimiter::admit(const std::string& key) {
  std::lock_guard lock(mu_);
  if (total_ >= max_total_) return Admit::TooManyTotal;
  int& n = per_client_[key];
  if (n >= max_per_client_) return Admit::TooManyFromClient;
  ++n;
  ++total_;
  return Admit::Yes;
}

void ConnectionLimiter::release(const std::string& key) {
  std::lock_guard lock(mu_);
  auto it = per_client_.find(key);
  if (it == per_client_.end()) return;
  --total_;
  if (--it->second == 0) per_client_.erase(it);
}

int ConnectionLimiter::open() const {
  std::lock_guard lock(mu_);
  return total_;
}

}  // namespace mx::server
