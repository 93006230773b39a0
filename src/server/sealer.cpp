// Sealer (sealer.h). Blob = base64("mx1" | nonce (16) | ciphertext | tag (32)); tag = HMAC(mac key,
// "mx1" | nonce | ciphertext); keystream block i = HMAC(enc key, nonce | i as 4 big-endian bytes).
#include "server/sealer.h"

#include <random>

#include "core/base64.h"
#include "core/sha256.h"

namespace mx::server {
namespace {

constexpr std::string_view kVersion = "mx1";
constexpr size_t kNonceBytes = 16, kTagBytes = 32;

std::string random_bytes(size_t n) {
  std::random_device rd;  // the OS's entropy source
  std::string out(n, '\0');
  for (size_t i = 0; i < n; i += 4) {
    const uint32_t v = rd();
    for (size_t j = 0; j < 4 && i + j < n; ++j) out[i + j] = char(v >> (8 * j));
  }
  return out;
}

std::string as_string(const Digest256& d) { return std::string(reinterpret_cast<const char*>(d.data()), d.size()); }

}  // namespace

Sealer::Sealer() : Sealer(random_bytes(32)) {}

Sealer::Sealer(std::string secret)
    : enc_key_(as_string(hmac_sha256(secret, "mxserve sealer encryption"))),
      mac_key_(as_string(hmac_sha256(secret, "mxserve sealer authentication"))) {}

std::string Sealer::crypt(std::string_view nonce, std::string_view data) const {
  std::string out(data);
  for (size_t i = 0; i < out.size(); i += 32) {
    const uint32_t block = uint32_t(i / 32);
    std::string input(nonce);
    for (int b = 3; b >= 0; --b) input += char(block >> (8 * b));
    const Digest256 ks = hmac_sha256(enc_key_, input);
    for (size_t j = 0; j < 32 && i + j < out.size(); ++j) out[i + j] = char(out[i + j] ^ ks[j]);
  }
  return out;
}

std::string Sealer::seal(std::string_view text) const {
  const std::string nonce = random_bytes(kNonceBytes);
  std::string body = std::string(kVersion) + nonce + crypt(nonce, text);
  body += as_string(hmac_sha256(mac_key_, body));
  return base64_encode(body);
}

std::optional<std::string> Sealer::open(std::string_view blob) const {
  const auto raw = base64_decode(blob);
  if (!raw || raw->size() < kVersion.size() + kNonceBytes + kTagBytes || !raw->starts_with(kVersion)) return std::nullopt;
  const std::string_view body = std::string_view(*raw).substr(0, raw->size() - kTagBytes);
  Digest256 tag;
  std::copy(raw->end() - kTagBytes, raw->end(), tag.begin());
  if (!digests_equal(tag, hmac_sha256(mac_key_, body))) return std::nullopt;
  const std::string_view nonce = body.substr(kVersion.size(), kNonceBytes);
  return crypt(nonce, body.substr(kVersion.size() + kNonceBytes));
}

}  // namespace mx::server
