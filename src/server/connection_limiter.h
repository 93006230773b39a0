// ConnectionLimiter: open connections counted in total and per client, so that one address (or
// one IPv6 /64, which a single host usually owns) cannot hold every connection of the server.
#pragma once

#include <sys/socket.h>

#include <map>
#include <mutex>
#include <string>

namespace mx::server {

// A connected client: its numeric address and port, and the key it is counted under.
struct Peer {
  std::string ip;
  int port = 0;
  std::string key;  // the IPv4 address, or the IPv6 /64 prefix ("2001:db8:1:2::/64")
};

Peer peer_of(const sockaddr_storage& addr);

class ConnectionLimiter {
 public:
  ConnectionLimiter(int max_total, int max_per_client) : max_total_(max_total), max_per_client_(max_per_client) {}
  enum class Admit { Yes, TooManyTotal, TooManyFromClient };
  // Yes counts the connection until release(key).
  Admit admit(const std::string& key);
  void release(const std::string& key);
  int open() const;

 private:
  const int max_total_, max_per_client_;
  mutable std::mutex mu_;
  std::map<std::string, int> per_client_;
  int total_ = 0;
};

}  // namespace mx::server
