// Base64 (RFC 4648, standard alphabet, padded) for opaque tokens in JSON.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace mx {

std::string base64_encode(std::string_view bytes);
// nullopt for characters outside the alphabet, a wrong length or misplaced padding.
std::optional<std::string> base64_decode(std::string_view text);

}  // namespace mx
