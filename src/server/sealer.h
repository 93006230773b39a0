// Sealer: text made opaque and unforgeable for a round trip through a client — the Responses
// API's `reasoning.encrypted_content`. A per-server random key; the text is encrypted with an
// HMAC-SHA256 keystream and authenticated with HMAC-SHA256 (encrypt-then-MAC, separate keys
// derived from the one secret). A blob opens only on the server instance that sealed it.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace mx::server {

class Sealer {
 public:
  Sealer();                         // a fresh random secret
  explicit Sealer(std::string secret);  // tests: a fixed one
  std::string seal(std::string_view text) const;  // base64 text
  // The sealed text; nullopt when the blob was altered, cut, or sealed with another secret.
  std::optional<std::string> open(std::string_view blob) const;

 private:
  std::string crypt(std::string_view nonce, std::string_view data) const;  // XOR with the keystream
  std::string enc_key_, mac_key_;
};

}  // namespace mx::server
