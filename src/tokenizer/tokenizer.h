// Tokenizer: byte-level BPE loaded from a Hugging Face tokenizer.json (o200k_harmony for gpt-oss),
// with the o200k pre-tokenizer regex and the added/special tokens; StreamDecoder turns a stream of
// ids into UTF-8 text without ever emitting half a character.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace mx {

enum class SpecialTokens { AsText, Allow };  // Allow: "<|start|>" in text becomes its special id

class Tokenizer {
 public:
  static Result<std::shared_ptr<const Tokenizer>> load(const std::filesystem::path& tokenizer_json);

  // Errors on invalid UTF-8 input (message names the byte offset).
  Result<std::vector<int32_t>> encode(std::string_view text, SpecialTokens special = SpecialTokens::AsText) const;
  // Raw bytes of the ids concatenated (may end in a partial UTF-8 sequence); unknown ids are skipped.
  std::string decode(std::span<const int32_t> ids) const;
  std::string_view token_bytes(int32_t id) const;  // "" for an unknown id
  std::optional<int32_t> token_id(std::string_view token) const;  // special or ordinary token string
  bool is_special(int32_t id) const;
  int32_t vocab_size() const;  // one past the largest defined id

  ~Tokenizer();
  struct Impl;

 private:
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  static Result<std::shared_ptr<const Tokenizer>> load_checked(const std::filesystem::path& tokenizer_json);
  std::unique_ptr<Impl> impl_;
};

// Feeds ids one at a time; returns the text that is complete so far (never half a UTF-8 character).
class StreamDecoder {
 public:
  explicit StreamDecoder(std::shared_ptr<const Tokenizer> tok) : tok_(std::move(tok)) {}
  std::string push(int32_t id);
  std::string flush();  // whatever is left (invalid tails become U+FFFD)

 private:
  std::shared_ptr<const Tokenizer> tok_;
  std::string pending_;
};

}  // namespace mx
