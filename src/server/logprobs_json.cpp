// Token strings (valid UTF-8; the raw bytes alongside) and the two logprobs layouts.
#include "server/logprobs_json.h"

#include "tokenizer/harmony_parser.h"

namespace mx::server {
namespace {

std::string token_text(const Tokenizer* tok, int32_t id) {
  return tok ? sanitize_utf8(tok->token_bytes(id)) : "token_id:" + std::to_string(id);
}

Json token_entry(const Tokenizer* tok, int32_t id, float logprob) {
  Json bytes = Json::array();
  if (tok)
    for (unsigned char b : tok->token_bytes(id)) bytes.push_back(int(b));
  return {{"token", token_text(tok, id)}, {"logprob", logprob}, {"bytes", bytes}};
}

}  // namespace

Json chat_logprob_entries(const Tokenizer* tok, std::span<const int32_t> ids, std::span<const TokenLogprob> lps) {
  Json out = Json::array();
  for (size_t i = 0; i < ids.size() && i < lps.size(); ++i) {
    Json e = token_entry(tok, ids[i], lps[i].logprob);
    Json top = Json::array();
    for (const auto& [id, lp] : lps[i].top) top.push_back(token_entry(tok, id, lp));
    e["top_logprobs"] = std::move(top);
    out.push_back(std::move(e));
  }
  return out;
}

Json completion_logprobs(const Tokenizer* tok, std::span<const int32_t> ids, std::span<const TokenLogprob> lps,
                         size_t offset0) {
  Json tokens = Json::array(), token_logprobs = Json::array(), top = Json::array(), offsets = Json::array();
  size_t offset = offset0;
  for (size_t i = 0; i < ids.size() && i < lps.size(); ++i) {
    const std::string t = token_text(tok, ids[i]);
    tokens.push_back(t);
    token_logprobs.push_back(lps[i].logprob);
    Json alts = Json::object();
    for (const auto& [id, lp] : lps[i].top) alts[token_text(tok, id)] = lp;
    top.push_back(std::move(alts));
    offsets.push_back(offset);
    offset += t.size();
  }
  return {{"tokens", tokens}, {"token_logprobs", token_logprobs}, {"top_logprobs", top}, {"text_offset", offsets}};
}

}  // namespace mx::server
