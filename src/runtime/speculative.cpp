// --speculative-config parsing, the n-gram proposer, acceptance and its counters.
#include "runtime/speculative.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

namespace mx {
namespace {

constexpr const char* kMethods = "\"ngram\", \"eagle3\"";
constexpr const char* kNgramKeys = "method, num_speculative_tokens, prompt_lookup_min, prompt_lookup_max, "
                                   "disable_by_batch_size, adaptive";
constexpr const char* kEagle3Keys = "method, model, num_speculative_tokens, disable_by_batch_size, adaptive, "
                                    "aux_layer_ids";
// Per round at most; a round feeds k + 1 tokens per sequence.
constexpr int kMaxSpeculativeTokens = 15;

Result<int> int_key(const nlohmann::json& j, const char* key, int lo, int hi) {
  const auto& v = j.at(key);
  MX_CHECK(v.is_number_integer(), "--speculative-config: \"{}\" must be an integer, got {}", key, v.dump());
  const int64_t x = v.get<int64_t>();
  MX_CHECK(x >= lo && x <= hi, "--speculative-config: \"{}\" must be in [{}, {}], got {}", key, lo, hi, x);
  return int(x);
}

}  // namespace

std::string SpeculativeConfig::describe() const {
  if (!enabled()) return "off";
  if (method == SpecMethod::Eagle3)
    return fmt::format("eagle3 draft {} (aux layer ids {}), {}{} tokens per round, off above {} running sequences",
                       model, aux_layer_ids, adaptive ? "up to " : "", num_speculative_tokens, disable_by_batch_size);
  return fmt::format("ngram, {}{} tokens per round, prompt lookup {}..{}, off above {} running sequences",
                     adaptive ? "up to " : "", num_speculative_tokens, prompt_lookup_min, prompt_lookup_max,
                     disable_by_batch_size);
}

Result<SpeculativeConfig> parse_speculative_config(std::string_view text) {
  SpeculativeConfig c;
  if (text.empty()) return c;
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  MX_CHECK(!j.is_discarded() && j.is_object(), "--speculative-config: expected a JSON object, got '{}'", text);
  MX_CHECK(j.contains("method") && j["method"].is_string(),
           "--speculative-config: \"method\" (a string) is required; supported: {}", kMethods);
  const std::string method = j["method"].get<std::string>();
  MX_CHECK(method == "ngram" || method == "eagle3", "--speculative-config: method \"{}\" is not supported; supported: {}",
           method, kMethods);
  c.method = method == "ngram" ? SpecMethod::Ngram : SpecMethod::Eagle3;
  for (const auto& [key, value] : j.items()) {
    const bool common = key == "method" || key == "num_speculative_tokens" || key == "disable_by_batch_size" ||
                        key == "adaptive";
    const bool own = c.method == SpecMethod::Ngram ? key == "prompt_lookup_min" || key == "prompt_lookup_max"
                                                   : key == "model" || key == "aux_layer_ids";
    MX_CHECK(common || own, "--speculative-config: unknown key \"{}\" for method {}; supported: {}", key, method,
             c.method == SpecMethod::Ngram ? kNgramKeys : kEagle3Keys);
  }
  MX_CHECK(j.contains("num_speculative_tokens"), "--speculative-config: \"num_speculative_tokens\" is required");
  MX_ASSIGN(c.num_speculative_tokens, int_key(j, "num_speculative_tokens", 0, kMaxSpeculativeTokens));
  if (c.method == SpecMethod::Eagle3) {
    MX_CHECK(j.contains("model") && j["model"].is_string() && !j["model"].get<std::string>().empty(),
             "--speculative-config: method eagle3 needs \"model\": the draft's folder or Hugging Face repo id");
    c.model = j["model"].get<std::string>();
    if (j.contains("aux_layer_ids")) {
      MX_CHECK(j["aux_layer_ids"].is_string() &&
                   (j["aux_layer_ids"] == "literal" || j["aux_layer_ids"] == "plus_one"),
               "--speculative-config: \"aux_layer_ids\" must be \"literal\" (vLLM's reading) or \"plus_one\", got {}",
               j["aux_layer_ids"].dump());
      c.aux_layer_ids = j["aux_layer_ids"].get<std::string>();
    }
  }
  if (c.method == SpecMethod::Ngram) {
    // vLLM's defaults: both 5 when neither is given, else the one given for both.
    const bool has_min = j.contains("prompt_lookup_min"), has_max = j.contains("prompt_lookup_max");
    if (has_min) {
      MX_ASSIGN(c.prompt_lookup_min, int_key(j, "prompt_lookup_min", 1, 1 << 20));
    }
    if (has_max) {
      MX_ASSIGN(c.prompt_lookup_max, int_key(j, "prompt_lookup_max", 1, 1 << 20));
    }
    if (!has_min && !has_max) c.prompt_lookup_min = c.prompt_lookup_max = 5;
    else if (!has_min) c.prompt_lookup_min = c.prompt_lookup_max;
    else if (!has_max) c.prompt_lookup_max = c.prompt_lookup_min;
    MX_CHECK(c.prompt_lookup_min <= c.prompt_lookup_max,
             "--speculative-config: prompt_lookup_min ({}) must not exceed prompt_lookup_max ({})", c.prompt_lookup_min,
             c.prompt_lookup_max);
  }
  if (j.contains("adaptive")) {
    MX_CHECK(j["adaptive"].is_boolean(), "--speculative-config: \"adaptive\" must be true or false, got {}",
             j["adaptive"].dump());
    c.adaptive = j["adaptive"].get<bool>();
  }
  if (j.contains("disable_by_batch_size")) {
    MX_ASSIGN(c.disable_by_batch_size, int_key(j, "disable_by_batch_size", 1, 1 << 20));
  }
  return c;
}

// One backward pass over the earlier positions: for each end position e < L - 1, the number of
// tokens that match going backwards from e and from L - 1 (capped at n_max); the latest e with the
// longest match wins.
void NgramProposer::propose(std::span<const int32_t> tokens, int k, std::vector<int32_t>& out) const {
  out.clear();
  const int64_t L = int64_t(tokens.size());
  if (k <= 0 || L < int64_t(n_min_) + 1) return;
  int64_t best_end = -1;
  int best_len = 0;
  for (int64_t e = L - 2; e >= 0; --e) {
    int n = 0;
    while (n < n_max_ && e - n >= 0 && tokens[size_t(e - n)] == tokens[size_t(L - 1 - n)]) ++n;
    if (n > best_len) {
      best_len = n;
      best_end = e;
      if (n == n_max_) break;
    }
  }
  if (best_len < n_min_) return;
  for (int64_t i = best_end + 1; i < L && int(out.size()) < k; ++i) out.push_back(tokens[size_t(i)]);
}

std::unique_ptr<DraftProposer> make_proposer(const SpeculativeConfig& c) {
  if (!c.enabled() || c.method != SpecMethod::Ngram) return nullptr;
  return std::make_unique<NgramProposer>(c.prompt_lookup_min, c.prompt_lookup_max);
}

int accepted_prefix(std::span<const int32_t> draft, std::span<const int32_t> samples) {
  size_t i = 0;
  while (i < draft.size() && i < samples.size() && samples[i] == draft[i]) ++i;
  return int(i);
}

int ForcedAcceptance::accepted(int drafts) {
  std::uniform_real_distribution<double> u(0.0, 1.0);
  int i = 0;
  while (i < drafts && u(rng_) < rate_) ++i;
  return i;
}

int DraftPolicy::choose(std::span<const Candidate> seqs) {
  const int64_t n = int64_t(seqs.size());
  int top = 0;  // lengths past every offer gain nothing
  for (const Candidate& s : seqs) top = std::max(top, std::min(s.offered, k_));
  if (top == 0) return 0;
  const uint64_t c = choices_++;
  for (int d = 0; d <= top; ++d)
    if (!time_.contains(n * (1 + d))) return d;  // not measured yet at this batch
  if (c % kReprobe == kReprobe - 1) return int((c / kReprobe) % uint64_t(top + 1));
  int best = 0;
  double best_rate = 0;
  for (int d = 0; d <= top; ++d) {
    double tokens = 0;
    for (const Candidate& s : seqs) {
      double p = 1;
      tokens += 1;
      for (int j = 1; j <= std::min(d, s.offered); ++j) tokens += (p *= s.rate);
    }
    const double rate = tokens / time_.at(n * (1 + d));
    if (rate > best_rate) best_rate = rate, best = d;
  }
  return best;
}

void DraftPolicy::observe(int64_t tokens, double seconds) {
  auto [it, fresh] = time_.try_emplace(tokens, seconds);
  if (!fresh) it->second = 0.7 * it->second + 0.3 * seconds;
}

void SpecStats::add_round(int drafted, int accepted) {
  if (drafted <= 0) return;
  drafts++;
  draft_tokens += uint64_t(drafted);
  accepted_tokens += uint64_t(accepted);
  if (accepted_per_position.size() < size_t(drafted)) accepted_per_position.resize(size_t(drafted));
  for (int i = 0; i < accepted; ++i) accepted_per_position[size_t(i)]++;
}

}  // namespace mx
