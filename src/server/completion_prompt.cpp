// The prompt field of /v1/completions (strings or token ids, each id checked against the
// vocabulary) and its "echo".
#include "server/completion_prompt.h"

#include <fmt/format.h>

namespace mx::server {

std::variant<std::vector<Prompt>, ApiError> prompts_of(const Json& body, const Tokenizer* tok, int64_t vocab, bool echo) {
  auto it = body.find("prompt");
  if (it == body.end() || it->is_null()) return bad_request("'prompt' is required", "prompt");
  std::vector<Json> items;
  if (it->is_array() && !it->empty() && !(*it)[0].is_number_integer()) items.assign(it->begin(), it->end());
  else items.push_back(*it);
  std::vector<Prompt> out;
  for (const Json& p : items) {
    if (p.is_string()) {
      if (!tok) return bad_request("this model has no tokenizer.json; send token ids", "prompt");
      auto ids = tok->encode(p.get<std::string>());
      if (!ids.ok()) return bad_request(ids.status(), "prompt", {});
      out.push_back({.ids = *ids, .text = echo ? p.get<std::string>() : ""});
    } else if (p.is_array()) {
      Prompt prompt;
      for (const Json& x : p) {
        const auto id = token_id(x, vocab);  // 4294980521 is refused, not run as 13225
        if (!id) return bad_request(fmt::format("'prompt' token ids must be integers in [0, {})", vocab), "prompt");
        prompt.ids.push_back(*id);
      }
      if (echo && tok) prompt.text = tok->decode(prompt.ids);
      out.push_back(std::move(prompt));
    } else {
      return bad_request("'prompt' must be a string, a list of token ids, or a list of those", "prompt");
    }
  }
  return out;
}

std::variant<bool, ApiError> echo_of(const Json& body, const SamplingRequest& sr) {
  auto it = body.find("echo");
  if (it == body.end() || it->is_null()) return false;
  if (!it->is_boolean()) return bad_request("'echo' must be a boolean", "echo");
  if (it->get<bool>() && sr.params.logprobs >= 0)
    return bad_request("'echo' with 'logprobs' is not supported: prompt logprobs are not computed", "echo");
  return it->get<bool>();
}

}  // namespace mx::server
