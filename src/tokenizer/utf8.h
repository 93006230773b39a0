// Strict UTF-8 decoding (no overlongs, no surrogates, nothing above U+10FFFF) and validation that
// reports the byte offset of the first bad sequence.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

namespace mx {

// Decodes the code point at s[pos] and advances pos past it; nullopt (pos unchanged) when invalid.
std::optional<char32_t> utf8_next(std::string_view s, size_t& pos);

// Offset of the first byte that does not start a valid sequence, or nullopt when s is valid.
std::optional<size_t> utf8_first_invalid(std::string_view s);

}  // namespace mx
