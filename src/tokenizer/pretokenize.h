// Pre-tokenizer: splits text into pieces with a PCRE2 regex (UTF + Unicode properties, JIT),
// matched like tiktoken's find_iter (leftmost-first alternatives); text between matches is a
// piece of its own, as a tokenizer.json Split with the "Isolated" behaviour means.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "core/status.h"

namespace mx {

// The o200k_base / o200k_harmony pattern (GPTOSS_SPEC §5.1).
inline constexpr std::string_view kO200kPattern =
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
    "|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
    "|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

class Pretokenizer {
 public:
  static Result<std::shared_ptr<const Pretokenizer>> create(std::string_view pattern);
  ~Pretokenizer();

  // Calls on_piece for every match in text, and for the text between matches, in order. text must be valid UTF-8 (not re-checked).
  // Safe to call from several threads at once.
  Status split(std::string_view text, const std::function<void(std::string_view)>& on_piece) const;

  bool jit() const { return jit_; }

  struct Code;

 private:
  Pretokenizer() = default;
  Code* code_ = nullptr;
  bool jit_ = false;
};

}  // namespace mx
