// Harmony messages as JSON (the shared fixture format: role, name, channel, recipient,
// content_type, content / system_content / developer_content), and the fixture cases themselves:
// render a case by its kind, parse a case's input token ids.
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <memory>
#include <vector>

#include "tokenizer/harmony.h"
#include "tokenizer/harmony_parser.h"

namespace mx::harmony {

using ojson = nlohmann::ordered_json;

Result<ojson> read_json_file(const std::filesystem::path& path);  // keeps key order

Result<ToolNamespace> namespace_from_json(const ojson& j);
// Missing system_content fields take the library defaults; null ones are unset.
Result<Message> message_from_json(const ojson& j);
Result<std::vector<Message>> messages_from_json(const ojson& j);
ojson message_to_json(const Message& m);  // every header field present, null when absent
ojson messages_to_json(std::span<const Message> messages);

// Renders a case of kind render_for_completion / render_conversation / render_for_training /
// render_message with its options.
Result<Rendered> render_case(const ojson& case_json);

struct ParseCase {
  std::vector<int32_t> ids;
  ParserOptions options;
  EndOfStream eos = EndOfStream::Pending;
};
// From {input: {token_ids | text}, options: {role, strict, process_eos}}; text is encoded with
// special tokens allowed when there are no token_ids (tok may be null otherwise).
Result<ParseCase> parse_case_input(const ojson& input, const ojson& options, const Tokenizer* tok);

}  // namespace mx::harmony
