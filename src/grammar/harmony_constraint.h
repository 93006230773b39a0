// HarmonyConstraint: guided decoding of one gpt-oss answer in the harmony format. The reasoning
// (analysis channel) stays free up to an optional token budget; then the answer must take one of
// the given targets: a final message or a tool call, its header forced byte for byte and its body
// free text or JSON under a schema, ended by <|return|> or <|call|>.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "grammar/json_matcher.h"
#include "grammar/vocab_trie.h"
#include "runtime/constraint.h"

namespace mx::grammar {

struct AnswerTarget {
  std::string header;  // after <|channel|>: "final", or "commentary to=functions.NAME"
  bool tool = false;   // a tool call: " <|constrain|>json" follows the header and <|call|> ends it
  std::shared_ptr<const Schema> schema;  // the body's JSON Schema; null: free text
};

struct HarmonyRule {
  std::vector<AnswerTarget> targets;  // one at least
  int max_reasoning_tokens = -1;      // analysis tokens at most; -1: unbounded, 0: none
  // The request's max_tokens (-1: unknown). Near it the answer is wrapped up: the analysis gives
  // way to a JSON answer while room is left (kAnswerReserve), and a JSON body closes the shortest
  // way once the tokens left barely cover that.
  int max_tokens = -1;
};

inline constexpr int kAnswerReserve = 48;  // tokens kept for a JSON answer (a quarter of max_tokens at most)

class HarmonyConstraint final : public TokenConstraint {
 public:
  static Result<std::unique_ptr<HarmonyConstraint>> create(std::shared_ptr<const VocabTrie> vocab, HarmonyRule rule);

  bool can_run_ahead(int pending) const override;
  const std::vector<uint32_t>& next_mask(int pending) override;
  int32_t accept(int32_t token) override;
  std::unique_ptr<TokenConstraint> fresh() const override;
  int reasoning_tokens() const { return reasoning_; }
  bool done() const { return phase_ == Phase::Done; }

 private:
  enum class Phase { Literal, Analysis, Body, Done };
  static constexpr int kToHeader = -2, kToAnalysis = -1;  // Alt::then besides a target index
  struct Alt {
    std::vector<int32_t> symbols;  // bytes (< 256) and special ids
    int then = kToHeader;
  };

  HarmonyConstraint(std::shared_ptr<const VocabTrie> vocab, HarmonyRule rule);
  void enter_literal(std::vector<Alt> alts);
  void enter_header();
  void enter_body(int target);
  bool budget_left(int extra) const;
  bool apply(int32_t token);  // false: the token is not allowed here (state unchanged)
  bool apply_literal(int32_t token);
  bool apply_body(int32_t token);
  void compute_mask(TokenMask& mask);
  void body_mask(TokenMask& mask);
  const TokenMask& json_mask();  // the body's mask under a schema, from the cache (kept there)
  int tokens_left() const;  // before max_tokens, the terminator kept (large when unbounded)

  std::shared_ptr<const VocabTrie> vocab_;
  HarmonyRule rule_;
  std::vector<std::vector<int32_t>> headers_;  // per target: header symbols through <|message|>
  Phase phase_ = Phase::Literal;
  int reasoning_ = 0;
  int generated_ = 0;  // tokens accepted
  int reserve_ = 0;    // tokens the analysis leaves for the answer
  // Literal phase: alternatives still alive, all matched up to pos_.
  std::vector<Alt> alts_;
  size_t pos_ = 0;
  // Body phase
  int target_ = -1;
  std::unique_ptr<JsonMatcher> matcher_;
  Arena states_[2] = {Arena(2048), Arena(2048)};
  int current_ = 0;
  MatchState state_;
  std::map<std::string, TokenMask> cache_;  // body masks by matcher state
  // Masks: next_mask() shows mask_ or a cached body mask (valid until accept())
  TokenMask mask_;
  const TokenMask* shown_ = nullptr;
};

}  // namespace mx::grammar
