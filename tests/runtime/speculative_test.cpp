// Speculative decoding (runtime/speculative.h) on the CPU backend with the tiny fixture model:
// --speculative-config parsing, the n-gram proposer, and the engine's rounds being lossless — with
// any draft (n-gram, an oracle whose drafts are all accepted, drafts that are always wrong), greedy
// and seeded sampling, several requests in a batch, prefix caching and preemption, stop ids and
// min_tokens mid-round, the output equals the engine's without speculation token for token.
// bench's forced acceptance gives the acceptance length it is asked for.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "kernels/ops.h"
#include "model/random_eagle3.h"
#include "runtime/bench.h"
#include "runtime/scheduler.h"
#include "runtime/speculative.h"
#include "engine_fixture.h"

namespace mx {
namespace {

using test::collect;
using test::Collected;
using test::tiny_model;

TEST(SpeculativeConfig, ParsesVllmKeysAndDefaults) {
  auto off = parse_speculative_config("");
  ASSERT_TRUE(off.ok());
  EXPECT_FALSE(off->enabled());

  auto c = parse_speculative_config(R"({"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 2,
                                        "prompt_lookup_max": 4, "disable_by_batch_size": 8})");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_TRUE(c->enabled());
  EXPECT_EQ(c->method, SpecMethod::Ngram);
  EXPECT_EQ(c->num_speculative_tokens, 3);
  EXPECT_EQ(c->prompt_lookup_min, 2);
  EXPECT_EQ(c->prompt_lookup_max, 4);
  EXPECT_EQ(c->disable_by_batch_size, 8);

  // vLLM's defaults: 5 and 5 when neither bound is given, else the given one for both.
  auto d = parse_speculative_config(R"({"method": "ngram", "num_speculative_tokens": 2})");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->prompt_lookup_min, 5);
  EXPECT_EQ(d->prompt_lookup_max, 5);
  EXPECT_EQ(d->disable_by_batch_size, kSpecDefaultDisableBatch);
  auto e = parse_speculative_config(R"({"method": "ngram", "num_speculative_tokens": 2, "prompt_lookup_max": 3})");
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->prompt_lookup_min, 3);
  auto eagle = parse_speculative_config(
      R"({"method": "eagle3", "model": "nvidia/gpt-oss-120b-Eagle3-v3", "num_speculative_tokens": 3,
          "aux_layer_ids": "plus_one"})");
  ASSERT_TRUE(eagle.ok()) << eagle.status().message();
  EXPECT_EQ(eagle->method, SpecMethod::Eagle3);
  EXPECT_EQ(eagle->model, "nvidia/gpt-oss-120b-Eagle3-v3");
  EXPECT_EQ(eagle->aux_layer_ids, "plus_one");
  EXPECT_EQ(make_proposer(*eagle), nullptr);  // its drafts come from the draft model, not the host
  auto zero = parse_speculative_config(R"({"method": "ngram", "num_speculative_tokens": 0})");
  ASSERT_TRUE(zero.ok());
  EXPECT_FALSE(zero->enabled());
}

TEST(SpeculativeConfig, RejectsWhatItDoesNotSupportWithTheSupportedList) {
  const std::pair<const char*, const char*> bad[] = {
      {"{", "JSON object"},
      {"[1]", "JSON object"},
      {R"({"num_speculative_tokens": 3})", "\"method\""},
      {R"({"method": "eagle3", "num_speculative_tokens": 3})", "needs \"model\""},
      {R"({"method": "eagle3", "model": "d", "num_speculative_tokens": 3, "prompt_lookup_min": 2})",
       "unknown key \"prompt_lookup_min\" for method eagle3"},
      {R"({"method": "eagle3", "model": "d", "num_speculative_tokens": 3, "aux_layer_ids": "minus_one"})",
       "\"literal\" (vLLM's reading) or \"plus_one\""},
      {R"({"method": "ngram", "num_speculative_tokens": 3, "model": "d"})", "unknown key \"model\" for method ngram"},
      {R"({"method": "medusa", "num_speculative_tokens": 3})", "supported: \"ngram\", \"eagle3\""},
      {R"({"method": "ngram", "num_speculative_tokens": 3, "lookahead": 2})", "unknown key \"lookahead\""},
      {R"({"method": "ngram"})", "num_speculative_tokens"},
      {R"({"method": "ngram", "num_speculative_tokens": -1})", "[0, 15]"},
      {R"({"method": "ngram", "num_speculative_tokens": 2.5})", "integer"},
      {R"({"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 0})", "prompt_lookup_min"},
      {R"({"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 4, "prompt_lookup_max": 2})",
       "must not exceed"},
  };
  for (const auto& [json, words] : bad) {
    auto r = parse_speculative_config(json);
    ASSERT_FALSE(r.ok()) << json;
    EXPECT_NE(r.status().message().find(words), std::string::npos) << json << ": " << r.status().message();
  }
}

std::vector<int32_t> ngram(std::vector<int32_t> tokens, int n_min, int n_max, int k) {
  std::vector<int32_t> out;
  NgramProposer(n_min, n_max).propose(tokens, k, out);
  return out;
}

TEST(NgramProposer, LongestSuffixThenLatestOccurrence) {
  // Suffix "1 2 3" occurred at 0..2: propose what followed it.
  EXPECT_EQ(ngram({1, 2, 3, 4, 5, 1, 2, 3}, 1, 3, 2), (std::vector<int32_t>{4, 5}));
  // Up to k tokens, and never past the end of the sequence.
  EXPECT_EQ(ngram({1, 2, 3, 4, 1, 2, 3}, 1, 3, 10), (std::vector<int32_t>{4, 1, 2, 3}));
  // "1 2" occurs twice before: the latest occurrence wins.
  EXPECT_EQ(ngram({1, 2, 7, 1, 2, 8, 1, 2}, 2, 2, 1), (std::vector<int32_t>{8}));
  // A longer match beats a later shorter one: "5 1 2" matches at 0..2, only "1 2" at 4..5.
  EXPECT_EQ(ngram({5, 1, 2, 6, 1, 2, 7, 5, 1, 2}, 1, 3, 1), (std::vector<int32_t>{6}));
  // Nothing shorter than n_min counts.
  EXPECT_TRUE(ngram({9, 1, 2, 6, 4, 2}, 2, 3, 3).empty());
  EXPECT_EQ(ngram({9, 1, 2, 6, 4, 2}, 1, 3, 3), (std::vector<int32_t>{6, 4, 2}));
  EXPECT_TRUE(ngram({1, 2, 3}, 1, 3, 3).empty());
  EXPECT_TRUE(ngram({}, 1, 3, 3).empty());
  EXPECT_TRUE(ngram({4, 4}, 1, 3, 0).empty());
}

TEST(SpeculativeAcceptance, PrefixAndForcedRates) {
  EXPECT_EQ(accepted_prefix(std::vector<int32_t>{1, 2, 3}, std::vector<int32_t>{1, 2, 9, 4}), 2);
  EXPECT_EQ(accepted_prefix(std::vector<int32_t>{1, 2, 3}, std::vector<int32_t>{1, 2, 3, 4}), 3);
  EXPECT_EQ(accepted_prefix(std::vector<int32_t>{5}, std::vector<int32_t>{1, 5}), 0);
  ForcedAcceptance all(1.0, 1), none(0.0, 1), half(0.5, 7);
  EXPECT_EQ(all.accepted(4), 4);
  EXPECT_EQ(none.accepted(4), 0);
  double sum = 0;
  for (int i = 0; i < 4000; ++i) sum += half.accepted(1);
  EXPECT_NEAR(sum / 4000, 0.5, 0.05);
}

// The draft length maximises expected tokens per second over the measured step times; lengths
// not measured yet are tried first, and nobody offering anything means no draft.
TEST(DraftPolicy, PicksTheFastestExpectedLength) {
  DraftPolicy p(3);
  const std::vector<DraftPolicy::Candidate> good = {{.offered = 3, .rate = 0.9}};
  for (int d = 0; d <= 3; ++d) {  // unmeasured lengths first; one sequence: 1, 1.4, 1.8, 2.2 s
    EXPECT_EQ(p.choose(good), d) << "unmeasured lengths first";
    p.observe(1 + d, 1.0 + 0.4 * d);
  }
  // rate 0.9: 1 / 1.36 / 1.51 / 1.56 tokens per second: all 3; rate 0.5: 1 / 1.07 / 0.97 / 0.85: 1.
  EXPECT_EQ(p.choose(good), 3);
  EXPECT_EQ(p.choose(std::vector<DraftPolicy::Candidate>{{.offered = 3, .rate = 0.5}}), 1);
  EXPECT_EQ(p.choose(std::vector<DraftPolicy::Candidate>{{.offered = 3, .rate = 0.2}}), 0);
  EXPECT_EQ(p.choose(std::vector<DraftPolicy::Candidate>{{.offered = 2, .rate = 0.9}}), 2) << "no gain past the offer";
  EXPECT_EQ(p.choose(std::vector<DraftPolicy::Candidate>{{.offered = 0, .rate = 0.9}}), 0);
  // Two sequences: steps of 2, 4, 6, 8 tokens, timed by their tokens (2 and 4 known already).
  const std::vector<DraftPolicy::Candidate> two = {{.offered = 3, .rate = 0.9}, {.offered = 0, .rate = 0.9}};
  EXPECT_EQ(p.choose(two), 2);
  p.observe(6, 3.0);
  EXPECT_EQ(p.choose(two), 3);
  p.observe(8, 3.8);
  // Only one of them gains: 2 / 1.4 = 1.43 tokens per second without drafts beats 2.9 / 2.2 = 1.32.
  EXPECT_EQ(p.choose(two), 0);
  // Every kReprobe-th choice re-measures a length in turn.
  int other = 0;
  for (int i = 0; i < DraftPolicy::kReprobe * 4; ++i) other += p.choose(good) != 3;
  EXPECT_GE(other, 2);
  EXPECT_LE(other, 4);
  AcceptanceRate r;
  EXPECT_NEAR(r.rate(), 2.0 / 3.0, 1e-12);
  for (int i = 0; i < 40; ++i) r.add(3, 0);
  EXPECT_LT(r.rate(), 0.02);
  for (int i = 0; i < 40; ++i) r.add(3, 3);
  EXPECT_GT(r.rate(), 0.95);
  AcceptanceRate failing;
  for (int i = 0; i < 40; ++i) failing.add(3, 0);
  EXPECT_LT(failing.rate(), 0.02);
  for (int i = 0; i < 100; ++i) failing.idle();  // no drafts for a while: back toward the prior
  EXPECT_GT(failing.rate(), 0.5);
  EXPECT_LT(failing.rate(), 2.0 / 3.0);
}

// Proposes each request's known continuation (from a run without speculation): every draft token
// is accepted.
class Oracle final : public DraftProposer {
 public:
  void add(const std::vector<int32_t>& prompt, const std::vector<int32_t>& output) { runs_[prompt] = output; }
  void propose(std::span<const int32_t> tokens, int k, std::vector<int32_t>& out) const override {
    out.clear();
    for (const auto& [prompt, output] : runs_) {
      if (tokens.size() < prompt.size() || !std::equal(prompt.begin(), prompt.end(), tokens.begin())) continue;
      for (size_t i = tokens.size() - prompt.size(); i < output.size() && int(out.size()) < k; ++i)
        out.push_back(output[i]);
      return;
    }
  }

 private:
  std::map<std::vector<int32_t>, std::vector<int32_t>> runs_;
};

// Proposes tokens unrelated to the sequence: nearly every draft is rejected.
class Wrong final : public DraftProposer {
 public:
  void propose(std::span<const int32_t> tokens, int k, std::vector<int32_t>& out) const override {
    out.clear();
    for (int i = 0; i < k; ++i) out.push_back(int32_t((tokens.back() * 7 + 31 * i + 1) % tiny_model().config.vocab_size));
  }
};

// Prompts with repeated phrases (the n-gram proposer finds them), different per request.
std::vector<int32_t> repetitive_prompt(int i) {
  std::vector<int32_t> p;
  for (int r = 0; r < 4; ++r)
    for (int t = 0; t < 5 + i; ++t) p.push_back(int32_t(20 + 13 * i + 3 * t));
  p.push_back(int32_t(20 + 13 * i));
  return p;
}

struct Workload {
  std::vector<RequestParams> requests;
};

// Eight requests: greedy and seeded sampling (top-k/top-p), logprobs, min_tokens with stop and eos
// ids, presence / frequency / repetition penalties (each row counts the drafts before it), lengths
// that end rounds early.
Workload make_workload() {
  Workload w;
  for (int i = 0; i < 8; ++i) {
    RequestParams p{.prompt = repetitive_prompt(i), .max_tokens = 9 + 3 * i, .ignore_eos = IgnoreEos::Yes};
    if (i % 2) p.sampling = {.temperature = 0.9f, .top_k = 40, .top_p = 0.95f, .seed = uint64_t(50 + i)};
    if (i % 3 == 0) p.logprobs = 2;
    if (i == 4) p.min_tokens = 4, p.eos_ids = {23, 24}, p.ignore_eos = IgnoreEos::No, p.stop_ids = {30};
    if (i == 5) p.sampling.frequency_penalty = 0.8f, p.sampling.repetition_penalty = 1.4f;
    if (i == 6) p.sampling.presence_penalty = 1.5f;
    w.requests.push_back(std::move(p));
  }
  return w;
}

struct RunResult {
  std::vector<Collected> out;
  EngineStats stats;
};

RunResult run(const Workload& w, EngineArgs a) {
  auto engine = Engine::create(tiny_model(), a);
  EXPECT_TRUE(engine.ok()) << engine.status().message();
  if (!engine.ok()) return {};
  auto streams = (*engine)->submit_all(w.requests);
  EXPECT_TRUE(streams.ok()) << streams.status().message();
  RunResult r;
  for (auto& s : *streams) r.out.push_back(collect(*s));
  r.stats = (*engine)->stats();
  return r;
}

EngineArgs args(int blocks, PrefixCaching prefix = PrefixCaching::Off) {
  return {.max_num_seqs = 8, .max_num_batched_tokens = 40, .max_model_len = 96, .kv_block_size = 4,
          .num_kv_blocks = blocks, .prefix_caching = prefix, .stats_interval_seconds = 0};
}

SpeculativeConfig ngram_config(int k) {
  return {.method = SpecMethod::Ngram, .num_speculative_tokens = k, .prompt_lookup_min = 1, .prompt_lookup_max = 3};
}

void expect_same(const RunResult& want, const RunResult& got, const std::string& what) {
  ASSERT_EQ(want.out.size(), got.out.size()) << what;
  for (size_t i = 0; i < want.out.size(); ++i) {
    EXPECT_EQ(got.out[i].tokens, want.out[i].tokens) << what << ", request " << i;
    EXPECT_EQ(got.out[i].reason, want.out[i].reason) << what << ", request " << i;
    ASSERT_EQ(got.out[i].logprobs.size(), want.out[i].logprobs.size()) << what << ", request " << i;
    for (size_t t = 0; t < want.out[i].logprobs.size(); ++t)
      EXPECT_NEAR(got.out[i].logprobs[t].logprob, want.out[i].logprobs[t].logprob, 1e-4)
          << what << ", request " << i << " token " << t;
  }
}

// The same outputs with any proposer, in a roomy pool, with prefix caching, and in a pool small
// enough to preempt; the oracle's drafts are all accepted, the wrong ones never.
TEST(SpeculativeEngine, LosslessWithAnyDraftBatchingPrefixCachingAndPreemption) {
  const Workload w = make_workload();
  const RunResult plain = run(w, args(256));
  auto oracle = std::make_shared<Oracle>();
  for (size_t i = 0; i < w.requests.size(); ++i) oracle->add(w.requests[i].prompt, plain.out[i].tokens);

  struct Case {
    std::string name;
    std::shared_ptr<const DraftProposer> proposer;
    int k;
    bool adaptive;
  };
  const std::vector<Case> cases = {{"ngram k=3", nullptr, 3, false},
                                   {"ngram k=3 adaptive", nullptr, 3, true},
                                   {"ngram k=1", nullptr, 1, false},
                                   {"oracle k=4", oracle, 4, false},
                                   {"oracle k=4 adaptive", oracle, 4, true},
                                   {"wrong k=2 adaptive", std::make_shared<Wrong>(), 2, true}};
  for (const Case& c : cases) {
    for (const int mode : {0, 1, 2}) {  // roomy pool, prefix caching, a pool that preempts
      EngineArgs a = mode == 2 ? args(30) : args(256, mode == 1 ? PrefixCaching::On : PrefixCaching::Off);
      a.speculative = ngram_config(c.k);
      a.speculative.adaptive = c.adaptive;
      a.draft_proposer = c.proposer;
      const std::string what = c.name + (mode == 0 ? "" : mode == 1 ? ", prefix caching" : ", preempting pool");
      const RunResult r = run(w, a);
      expect_same(plain, r, what);
      const SpecStats& st = r.stats.spec;
      EXPECT_GT(st.drafts, 0u) << what;
      if (c.proposer == oracle && !c.adaptive) {  // (adaptive pads a short offer with fillers)
        EXPECT_EQ(st.accepted_tokens, st.draft_tokens) << what;
      }
      if (c.name == "ngram k=3" && mode == 0) {
        EXPECT_GT(st.accepted_tokens, 0u) << "the prompts repeat: some drafts hit";
      }
      if (mode == 2) {
        EXPECT_GT(r.stats.preemptions_total, 0u) << what << ": the pool was meant to preempt";
      }
      EXPECT_EQ(r.stats.spec_tokens, c.k);
    }
  }
}

// An EAGLE-3 draft with random weights for the tiny model (vocabulary 320, a draft vocabulary of 100
// through d2t): drafts every round, nearly all rejected, and the outputs of the workload equal those
// without speculation in the roomy pool, with prefix caching and in the pool that preempts.
// A second draft takes the target's final hidden state instead of aux states (use_aux_hidden_state:
// false, NVIDIA's -v2 drafts) and hands on its normed output (norm_output).
TEST(SpeculativeEngine, Eagle3LosslessWithBatchingPrefixCachingAndPreemption) {
  const auto dir = test::temp_dir("eagle3_tiny_draft");
  ASSERT_TRUE(write_random_eagle3(dir, {.vocab = 320, .draft_vocab = 100, .aux_layer_ids = {0, 1, 2}, .seed = 5}).ok());
  const auto dir2 = test::temp_dir("eagle3_tiny_draft_final");
  ASSERT_TRUE(write_random_eagle3(dir2, {.vocab = 320, .draft_vocab = 320, .use_aux_hidden_state = false,
                                         .norm_output = true, .seed = 6})
                  .ok());
  const Workload w = make_workload();
  const RunResult plain = run(w, args(256));
  for (const bool adaptive : {false, true})
    for (const int mode : {0, 1, 2, 3}) {  // 3: the final-hidden draft in the roomy pool
      EngineArgs a = mode == 2 ? args(30) : args(256, mode == 1 ? PrefixCaching::On : PrefixCaching::Off);
      a.speculative = {.method = SpecMethod::Eagle3, .num_speculative_tokens = adaptive ? 2 : 3,
                       .model = (mode == 3 ? dir2 : dir).string(), .adaptive = adaptive};
      const std::string what = std::string("eagle3") + (adaptive ? " adaptive" : "") +
                               (mode == 0   ? ""
                                : mode == 1 ? ", prefix caching"
                                : mode == 2 ? ", preempting pool"
                                            : ", final-hidden draft");
      const RunResult r = run(w, a);
      expect_same(plain, r, what);
      EXPECT_GT(r.stats.spec.drafts, 0u) << what;
      if (mode == 2) {
        EXPECT_GT(r.stats.preemptions_total, 0u) << what << ": the pool was meant to preempt";
      }
    }
}

// A draft that does not fit the target is refused when the engine is made, with the reason.
TEST(SpeculativeEngine, Eagle3DraftErrorsAtCreation) {
  const auto dir = test::temp_dir("eagle3_wide_draft");
  ASSERT_TRUE(write_random_eagle3(dir, {.hidden = 128, .vocab = 320}).ok());
  EngineArgs a = args(256);
  a.speculative = {.method = SpecMethod::Eagle3, .num_speculative_tokens = 3, .model = dir.string()};
  auto e = Engine::create(tiny_model(), a);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("hidden_size 128 differs from the target's 64"), std::string::npos)
      << e.status().message();
  a.speculative.model = (dir / "missing").string();
  auto m = Engine::create(tiny_model(), a);
  ASSERT_FALSE(m.ok());
}

// A stop id inside a round ends the request there (the accepted drafts after it are not emitted);
// max_tokens caps a round; min_tokens bans stop ids in the round's early rows.
TEST(SpeculativeEngine, StopIdsMaxTokensAndMinTokensInsideRounds) {
  const std::vector<int32_t> prompt = repetitive_prompt(2);
  RequestParams base{.prompt = prompt, .max_tokens = 20, .ignore_eos = IgnoreEos::Yes};
  const RunResult free_run = run({{base}}, args(256));
  const std::vector<int32_t>& toks = free_run.out[0].tokens;
  ASSERT_EQ(toks.size(), 20u);
  auto oracle = std::make_shared<Oracle>();
  oracle->add(prompt, toks);

  std::vector<RequestParams> reqs;
  RequestParams stop = base;
  stop.stop_ids = {toks[6]};  // its first occurrence ends the request
  reqs.push_back(stop);
  RequestParams min = stop;
  min.min_tokens = 8;  // the stop id is banned in the rows before token 8
  min.sampling = {.temperature = 0.8f, .seed = 5};
  reqs.push_back(min);
  RequestParams shortest = base;
  shortest.max_tokens = 3;
  reqs.push_back(shortest);
  const RunResult plain = run({reqs}, args(256));
  EngineArgs a = args(256);
  a.speculative = ngram_config(5);
  a.speculative.adaptive = false;
  a.draft_proposer = oracle;
  const RunResult spec = run({reqs}, a);
  expect_same(plain, spec, "oracle k=5");
  EXPECT_EQ(spec.out[0].reason, FinishReason::Stop);
  EXPECT_EQ(spec.out[0].tokens.back(), toks[6]);
  EXPECT_LE(spec.out[0].tokens.size(), 7u);
  EXPECT_EQ(spec.out[2].tokens.size(), 3u);
  EXPECT_GT(spec.stats.spec.accepted_tokens, 0u);
}

// bench's forced acceptance: rate 1 accepts every draft (k + 1 tokens a round), rate 0 none.
TEST(SpeculativeEngine, ForcedAcceptanceGivesTheAskedLength) {
  const int k = 3;
  RequestParams p{.prompt = repetitive_prompt(1), .max_tokens = 1 + 4 * (k + 1), .ignore_eos = IgnoreEos::Yes};
  for (const double rate : {1.0, 0.0}) {
    EngineArgs a = args(256);
    a.speculative = ngram_config(k);
    a.speculative.adaptive = false;
    a.spec_acceptance_rate = rate;
    const RunResult r = run({{p}}, a);
    ASSERT_EQ(r.out.size(), 1u);
    EXPECT_EQ(r.out[0].tokens.size(), size_t(p.max_tokens));
    EXPECT_EQ(r.out[0].reason, FinishReason::Length);
    EXPECT_GT(r.stats.spec.drafts, 0u);
    if (rate == 1.0) {
      EXPECT_EQ(r.stats.spec.draft_tokens, r.stats.spec.drafts * k) << "a full draft every round";
    }
    EXPECT_DOUBLE_EQ(r.stats.spec.mean_acceptance_length(), rate == 1.0 ? k + 1.0 : 1.0) << "rate " << rate;
  }
}

// bench reports the acceptance length of its speculative rows and labels forced ones.
TEST(SpeculativeEngine, BenchRowsReportAcceptance) {
  BenchOptions o{.prompt_lengths = {0}, .gen_lengths = {10}, .reps = 1};  // 1 + 3 rounds of 3
  o.speculative = ngram_config(2);
  o.speculative.adaptive = false;
  o.spec_acceptance_rate = 1.0;
  auto rep = run_bench(tiny_model(), o);
  ASSERT_TRUE(rep.ok()) << rep.status().message();
  ASSERT_EQ(rep->rows.size(), 1u);
  EXPECT_DOUBLE_EQ(rep->rows[0].acceptance_length, 3.0);
  EXPECT_TRUE(rep->rows[0].forced_acceptance);
  const std::string table = format_bench_table(tiny_model(), *rep);
  EXPECT_DOUBLE_EQ(rep->rows[0].draft_length, 2.0);
  EXPECT_DOUBLE_EQ(rep->rows[0].drafting_share, 1.0);
  EXPECT_NE(table.find("3.00 tokens per round of 2.00 drafts, drafts in 100% of steps, FORCED acceptance"),
            std::string::npos)
      << table;
}

// On CUDA (tiny-gqa8): uniform rounds replay CUDA graphs (a bucket of sequences x k + 1 tokens),
// mixed ones run eagerly. A round's rows come from kernels run over k + 1 tokens (the attention
// splits its keys by the call's size), so their logits may differ from a one-token step's by BF16
// rounding: the tokens must equal those without speculation up to the first position where the
// run without speculation had a near-tie between its top two tokens (the tiny model's random
// weights give many), with log-probabilities that agree to BF16 noise (a wrong position or a
// stale key would move them by whole units).
TEST(SpeculativeEngine, CudaRoundsReplayGraphsAndKeepTheTokens) {
  if (!ops::cuda_available()) GTEST_SKIP() << "no CUDA device";
  auto model = Model::load((test::fixtures_dir() / "models" / "tiny-gqa8").string(), Device::CUDA, ShowProgress::No);
  ASSERT_TRUE(model.ok()) << model.status().message();
  std::vector<RequestParams> reqs;
  for (int i = 0; i < 5; ++i)
    reqs.push_back({.prompt = repetitive_prompt(i), .max_tokens = 24 + 4 * i, .ignore_eos = IgnoreEos::Yes,
                    .logprobs = 2});
  auto run_on = [&](EngineArgs a) {
    auto engine = Engine::create(**model, a);
    EXPECT_TRUE(engine.ok()) << engine.status().message();
    RunResult r;
    if (!engine.ok()) return r;
    r.out.push_back(collect(**(*engine)->submit(reqs[0])));  // alone: uniform rounds
    auto streams = (*engine)->submit_all({reqs.begin() + 1, reqs.end()});  // then four together
    EXPECT_TRUE(streams.ok());
    for (auto& s : *streams) r.out.push_back(collect(*s));
    r.stats = (*engine)->stats();
    return r;
  };
  auto expect_equal_until_a_tie = [&](const RunResult& plain, const RunResult& spec, const std::string& what) {
    ASSERT_EQ(plain.out.size(), spec.out.size());
    double sum = 0;
    int matched = 0;
    for (size_t i = 0; i < plain.out.size(); ++i) {
      const Collected &want = plain.out[i], &got = spec.out[i];
      ASSERT_EQ(got.tokens.size(), want.tokens.size()) << what << ", request " << i;
      size_t t = 0;
      for (; t < want.tokens.size() && got.tokens[t] == want.tokens[t]; ++t, ++matched) {
        const double d = std::abs(got.logprobs[t].logprob - want.logprobs[t].logprob);
        sum += d;
        EXPECT_LT(d, 0.25) << what << ", request " << i << " token " << t;
      }
      if (t == want.tokens.size()) continue;
      const auto& top = want.logprobs[t].top;
      ASSERT_EQ(top.size(), 2u);
      EXPECT_LT(top[0].second - top[1].second, 0.1)
          << what << ", request " << i << ": differs at token " << t << " without a near-tie";
    }
    EXPECT_GT(matched, 20) << what;
    EXPECT_LT(sum / std::max(matched, 1), 0.02) << what << ": mean |logprob difference| over " << matched << " tokens";
  };
  EngineArgs a = {.max_num_seqs = 8, .max_num_batched_tokens = 64, .max_model_len = 128, .kv_block_size = 16,
                  .num_kv_blocks = 128, .stats_interval_seconds = 0};
  const RunResult plain = run_on(a);
  auto oracle = std::make_shared<Oracle>();
  for (size_t i = 0; i < reqs.size(); ++i) oracle->add(reqs[i].prompt, plain.out[i].tokens);
  a.speculative = ngram_config(3);
  a.draft_proposer = oracle;
  const RunResult spec = run_on(a);
  expect_equal_until_a_tie(plain, spec, "cuda, oracle k=3");
  EXPECT_GE(spec.stats.spec.accepted_tokens * 2, spec.stats.spec.draft_tokens) << "most drafts accepted";
  EXPECT_GT(spec.stats.graph_replays_total, 0u) << "uniform rounds replay graphs";
  a.draft_proposer = nullptr;  // n-gram: rounds of different lengths, some eager
  expect_equal_until_a_tie(plain, run_on(a), "cuda, ngram k=3");
  // EAGLE-3 (a random draft of head_dim 64, the CUDA attention's): the draft runs on the GPU after
  // every step; its drafts are rejected, the tokens stay.
  const auto dir = test::temp_dir("eagle3_gqa8_draft");
  RandomEagle3Spec ds{.hidden = 160, .heads = 2, .kv_heads = 1, .head_dim = 64, .vocab = 400, .draft_vocab = 64,
                      .aux_layer_ids = {0, 1, 2}};
  ASSERT_TRUE(write_random_eagle3(dir, ds).ok());
  a.speculative = {.method = SpecMethod::Eagle3, .num_speculative_tokens = 3, .model = dir.string(), .adaptive = false};
  const RunResult eagle = run_on(a);
  expect_equal_until_a_tie(plain, eagle, "cuda, eagle3 k=3");
  EXPECT_GT(eagle.stats.spec.draft_tokens, 0u);
  // A draft fed the target's final post-norm hidden state (use_aux_hidden_state: false).
  const auto dir2 = test::temp_dir("eagle3_gqa8_final");
  ds.use_aux_hidden_state = false;
  ds.draft_vocab = 400;
  ASSERT_TRUE(write_random_eagle3(dir2, ds).ok());
  a.speculative.model = dir2.string();
  expect_equal_until_a_tie(plain, run_on(a), "cuda, eagle3 final-hidden k=3");
}

}  // namespace
}  // namespace mx
