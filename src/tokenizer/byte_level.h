// GPT-2 byte-level alphabet: every byte 0..255 is written as one printable code point in the
// vocab and merges of a Hugging Face tokenizer.json. Converts such strings back to raw bytes.
#pragma once

#include <string>
#include <string_view>

#include "core/status.h"

namespace mx {

// "Ġhello" -> " hello". Errors when a code point is not in the byte-level alphabet.
Result<std::string> byte_level_to_bytes(std::string_view text);

// The code point that stands for byte b (printable bytes map to themselves, others to 256+n).
char32_t byte_level_code_point(unsigned char b);

}  // namespace mx
