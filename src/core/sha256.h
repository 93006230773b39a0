// SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104), for the server's sealed blobs (the Responses
// API's encrypted reasoning). Not for bulk data: plain, portable, one block at a time.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

namespace mx {

using Digest256 = std::array<uint8_t, 32>;

class Sha256 {
 public:
  Sha256();
  void update(std::string_view bytes);
  Digest256 digest();  // finishes; the object is spent

 private:
  void block(const uint8_t* p);
  std::array<uint32_t, 8> h_;
  std::array<uint8_t, 64> buf_{};
  size_t buf_len_ = 0;
  uint64_t total_ = 0;
};

Digest256 sha256(std::string_view bytes);
Digest256 hmac_sha256(std::string_view key, std::string_view message);

// Equal in time that depends on the length only.
bool digests_equal(const Digest256& a, const Digest256& b);

}  // namespace mx
