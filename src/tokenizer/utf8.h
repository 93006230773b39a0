// UTF-8: strict decoding (no overlongs, no surrogates, nothing above U+10FFFF), validation that
// reports the byte offset of the first bad sequence, and the lossy repair streamed model output
// needs: one U+FFFD per maximal subpart of an ill-formed sequence (Unicode §3.9, "U+FFFD
// Substitution of Maximal Subparts"; what openai-harmony's from_utf8_lossy does), and where a
// byte stream can be cut without splitting a character that may still be completed.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace mx {

// Decodes the code point at s[pos] and advances pos past it; nullopt (pos unchanged) when invalid.
std::optional<char32_t> utf8_next(std::string_view s, size_t& pos);

// Offset of the first byte that does not start a valid sequence, or nullopt when s is valid.
std::optional<size_t> utf8_first_invalid(std::string_view s);

// Bytes of s[pos...] that are a prefix of a well-formed sequence: its whole length when the
// sequence is complete, fewer when it is ill-formed or cut short (at least 1: a byte that can
// start no sequence is a maximal subpart of its own).
size_t utf8_well_formed_prefix(std::string_view s, size_t pos);

// Bytes -> valid UTF-8: each maximal subpart of an ill-formed sequence becomes one U+FFFD
// ("\xF0\x9F\x98" -> one U+FFFD, a surrogate "\xED\xA0\x80" -> three).
std::string sanitize_utf8(std::string_view bytes);

// Length of the longest prefix of `bytes` that does not end inside an incomplete sequence that
// later bytes could still complete.
size_t utf8_complete_prefix(std::string_view bytes);

}  // namespace mx
