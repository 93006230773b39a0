// HarmonyConstraint: phases Literal (forced or alternative header symbols), Analysis (free up to
// the budget), Body (free text or JSON) and Done; masks computed on demand and cached per state.
#include "grammar/harmony_constraint.h"

#include <algorithm>

namespace mx::grammar {
namespace {

constexpr size_t kMaxCachedMasks = 32;
// Within this many tokens of the last one that still lets a wrap-up fit, masks check each token's
// wrap-up cost (a token may open a key or a string that must then be finished).
constexpr int kWatchTokens = 64;

void append_bytes(std::vector<int32_t>& out, std::string_view s) {
  for (unsigned char c : s) out.push_back(int32_t(c));
}

Arena& scratch_arena() {
  thread_local Arena arena(1 << 16);
  return arena;
}

}  // namespace

Result<std::unique_ptr<HarmonyConstraint>> HarmonyConstraint::create(std::shared_ptr<const VocabTrie> vocab,
                                                                      HarmonyRule rule) {
  MX_CHECK(vocab != nullptr, "guided decoding needs the vocabulary");
  MX_CHECK(!rule.targets.empty(), "guided decoding needs at least one way to answer");
  const HarmonyIds& ids = vocab->ids();
  MX_CHECK(ids.start >= 0 && ids.end >= 0 && ids.message >= 0 && ids.channel >= 0 && ids.constrain >= 0 &&
               ids.ret >= 0 && ids.call >= 0,
           "guided decoding needs the harmony special tokens, which this tokenizer lacks");
  return std::unique_ptr<HarmonyConstraint>(new HarmonyConstraint(std::move(vocab), std::move(rule)));
}

HarmonyConstraint::HarmonyConstraint(std::shared_ptr<const VocabTrie> vocab, HarmonyRule rule)
    : vocab_(std::move(vocab)), rule_(std::move(rule)), mask_(vocab_->vocab()) {
  const HarmonyIds& ids = vocab_->ids();
  for (const AnswerTarget& t : rule_.targets) {
    std::vector<int32_t> h;
    append_bytes(h, t.header);
    if (t.tool) {
      append_bytes(h, " ");
      h.push_back(ids.constrain);
      append_bytes(h, "json");
    }
    h.push_back(ids.message);
    headers_.push_back(std::move(h));
  }
  const bool json_answer = std::any_of(rule_.targets.begin(), rule_.targets.end(), [](const AnswerTarget& t) { return t.schema != nullptr; });
  if (json_answer && rule_.max_tokens > 0) reserve_ = std::min(kAnswerReserve, rule_.max_tokens / 4);
  enter_literal({Alt{.symbols = {ids.channel}, .then = kToHeader}});
}

std::unique_ptr<TokenConstraint> HarmonyConstraint::fresh() const {
  return std::unique_ptr<TokenConstraint>(new HarmonyConstraint(vocab_, rule_));
}

bool HarmonyConstraint::budget_left(int extra) const {
  if (rule_.max_tokens > 0 && generated_ + extra + reserve_ >= rule_.max_tokens) return false;
  return rule_.max_reasoning_tokens < 0 || reasoning_ + extra < rule_.max_reasoning_tokens;
}

int HarmonyConstraint::tokens_left() const {
  return rule_.max_tokens > 0 ? rule_.max_tokens - generated_ - 1 : 1 << 30;
}

void HarmonyConstraint::enter_literal(std::vector<Alt> alts) {
  phase_ = Phase::Literal;
  alts_ = std::move(alts);
  pos_ = 0;
}

void HarmonyConstraint::enter_header() {
  std::vector<Alt> alts;
  if (budget_left(0)) {
    Alt a{.then = kToAnalysis};
    append_bytes(a.symbols, "analysis");
    a.symbols.push_back(vocab_->ids().message);
    alts.push_back(std::move(a));
  }
  for (size_t k = 0; k < headers_.size(); ++k) alts.push_back(Alt{.symbols = headers_[k], .then = int(k)});
  enter_literal(std::move(alts));
}

void HarmonyConstraint::enter_body(int target) {
  phase_ = Phase::Body;
  target_ = target;
  cache_.clear();
  matcher_.reset();
  if (const auto& schema = rule_.targets[size_t(target)].schema) {
    matcher_ = std::make_unique<JsonMatcher>(schema);
    states_[0].rewind(0);
    current_ = 0;
    state_ = matcher_->start(states_[0]);
  }
}

bool HarmonyConstraint::can_run_ahead(int pending) const {
  if (pending == 0) return true;
  if (phase_ == Phase::Analysis) return budget_left(pending);
  return phase_ == Phase::Body && !matcher_;
}

const std::vector<uint32_t>& HarmonyConstraint::next_mask(int pending) {
  if (pending > 0) {  // run ahead: the mask of the phase now (accept() puts in a forced token)
    shown_ = nullptr;
    mask_.words.assign(vocab_->ordinary().words.begin(), vocab_->ordinary().words.end());
    mask_.allow(phase_ == Phase::Analysis ? vocab_->ids().end : rule_.targets[size_t(target_)].tool ? vocab_->ids().call
                                                                                                     : vocab_->ids().ret);
    return mask_.words;
  }
  if (shown_ == nullptr && phase_ == Phase::Body && matcher_) {
    shown_ = &json_mask();
  } else if (shown_ == nullptr) {
    std::fill(mask_.words.begin(), mask_.words.end(), 0u);
    compute_mask(mask_);
    shown_ = &mask_;
  }
  return shown_->words;
}

void HarmonyConstraint::compute_mask(TokenMask& mask) {
  const HarmonyIds& ids = vocab_->ids();
  switch (phase_) {
    case Phase::Literal:
      for (const Alt& a : alts_) {
        if (a.symbols[pos_] >= 256) {
          mask.allow(a.symbols[pos_]);
          continue;
        }
        std::string run;
        for (size_t i = pos_; i < a.symbols.size() && a.symbols[i] < 256; ++i) run.push_back(char(a.symbols[i]));
        vocab_->allow_prefixes_of(run, mask);
      }
      return;
    case Phase::Analysis:
      if (budget_left(0)) mask.words = vocab_->ordinary().words;
      mask.allow(ids.end);
      return;
    case Phase::Body: return body_mask(mask);
    case Phase::Done: return;
  }
}

void HarmonyConstraint::body_mask(TokenMask& mask) {
  if (matcher_) {
    mask.words = json_mask().words;
    return;
  }
  mask.words = vocab_->ordinary().words;
  mask.allow(rule_.targets[size_t(target_)].tool ? vocab_->ids().call : vocab_->ids().ret);
}

const TokenMask& HarmonyConstraint::json_mask() {
  const int32_t terminator = rule_.targets[size_t(target_)].tool ? vocab_->ids().call : vocab_->ids().ret;
  // Near max_tokens: first only tokens after which a wrap-up still fits the tokens left (each of
  // its tokens is a byte at least), then the wrap-up itself (closing mode).
  MatchState state = state_;
  const int left = tokens_left(), need = matcher_->closing_bytes(state_);
  state.closing = left <= need + 1;
  const int budget = !state.closing && left <= need + kWatchTokens ? left - 1 : -1;
  std::string key = matcher_->key(state) + std::to_string(budget);
  if (auto it = cache_.find(key); it != cache_.end()) return it->second;
  TokenMask mask(vocab_->vocab());
  vocab_->allow_json(*matcher_, state, scratch_arena(), mask, budget);
  if (mask.none() && !matcher_->can_end(state_)) {  // never expected: the wrap-up alone
    state.closing = true;
    vocab_->allow_json(*matcher_, state, scratch_arena(), mask);
  }
  // The document is complete, or (never expected) nothing can follow: the terminator ends it.
  if (matcher_->can_end(state_) || mask.none()) mask.allow(terminator);
  if (cache_.size() >= kMaxCachedMasks) cache_.erase(cache_.begin());  // shown_ is reset by accept() first
  return cache_.emplace(std::move(key), std::move(mask)).first->second;
}

int32_t HarmonyConstraint::accept(int32_t token) {
  shown_ = nullptr;  // the shown mask may be a cached one that this evicts
  if (apply(token)) {
    generated_++;
    return token;
  }
  // Drawn ahead under an older mask: the one token allowed now takes its place.
  TokenMask now(vocab_->vocab());
  compute_mask(now);
  const int32_t forced = now.only();
  if (forced >= 0 && apply(forced)) {
    generated_++;
    return forced;
  }
  return -1;
}

bool HarmonyConstraint::apply(int32_t token) {
  const HarmonyIds& ids = vocab_->ids();
  bool ok = false;
  switch (phase_) {
    case Phase::Literal: ok = apply_literal(token); break;
    case Phase::Analysis:
      if (token == ids.end) {
        Alt next{.then = kToHeader};
        next.symbols.push_back(ids.start);
        append_bytes(next.symbols, "assistant");
        next.symbols.push_back(ids.channel);
        enter_literal({std::move(next)});
        ok = true;
      } else if (budget_left(0) && vocab_->ordinary().allows(token)) {
        reasoning_++;
        ok = true;
      }
      break;
    case Phase::Body: ok = apply_body(token); break;
    case Phase::Done: break;
  }
  return ok;
}

bool HarmonyConstraint::apply_literal(int32_t token) {
  std::vector<int32_t> symbols;
  if (vocab_->ordinary().allows(token)) append_bytes(symbols, vocab_->bytes(token));
  else symbols.push_back(token);
  std::vector<Alt> alive;
  for (Alt& a : alts_)
    if (pos_ + symbols.size() <= a.symbols.size() && std::equal(symbols.begin(), symbols.end(), a.symbols.begin() + long(pos_)))
      alive.push_back(std::move(a));
  if (alive.empty()) return false;
  alts_ = std::move(alive);
  pos_ += symbols.size();
  auto done = std::find_if(alts_.begin(), alts_.end(), [&](const Alt& a) { return a.symbols.size() == pos_; });
  if (done == alts_.end()) return true;
  const int then = done->then;
  if (then == kToHeader) enter_header();
  else if (then == kToAnalysis) phase_ = Phase::Analysis;
  else enter_body(then);
  return true;
}

bool HarmonyConstraint::apply_body(int32_t token) {
  const HarmonyIds& ids = vocab_->ids();
  const int32_t terminator = rule_.targets[size_t(target_)].tool ? ids.call : ids.ret;
  if (token == terminator) {
    if (matcher_ && !matcher_->can_end(state_)) {
      TokenMask m(vocab_->vocab());
      body_mask(m);
      if (!m.allows(terminator)) return false;
    }
    phase_ = Phase::Done;
    return true;
  }
  if (!vocab_->ordinary().allows(token)) return false;
  if (!matcher_) return true;
  Arena& scratch = scratch_arena();
  const size_t mark = scratch.mark();
  MatchState next;
  const bool ok = matcher_->advance(state_, vocab_->bytes(token), next, scratch);
  if (ok) {  // compact: the new state's frames into the other arena
    Arena& into = states_[1 - current_];
    into.rewind(0);
    state_ = matcher_->copy(next, into);
    current_ = 1 - current_;
  }
  scratch.rewind(mark);
  return ok;
}

}  // namespace mx::grammar
