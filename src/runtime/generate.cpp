// generate(): host-side staging of the per-call token arrays, chunked prefill, decode loop, the
// engine's sampling rule on the host.
#include "runtime/generate.h"

#include <algorithm>
#include <chrono>
#include <memory>

#include "model/forward.h"
#include "runtime/batch_staging.h"
#include "runtime/kv_cache.h"

namespace mx {
namespace {

using Clock = std::chrono::steady_clock;

// The engine's sampling stage on one row of host logits (the CPU ops): penalties and logit_bias,
// then the draw at `draw_position`, so that a seed picks the same tokens here as in the engine.
Result<int32_t> sample_row(std::span<const float> logits, const SamplingParams& sp, int32_t draw_position,
                           const TokenCounts* counts) {
  SampleRows rows;
  rows.add(sp, draw_position, -1, counts, {});
  std::vector<float> row(logits.begin(), logits.end());
  const int64_t V = int64_t(row.size());
  const Tensor t(row.data(), DType::F32, {1, V});
  ops::Context cx;  // the row is on the host: the CPU reference samples it
  if (rows.any_entries) {
    std::vector<float> saved(rows.entries.size());
    MX_TRY(ops::logits_process(cx, {.logits = t,
                                .penalties = Tensor(rows.penalties.data(), DType::F32, {1, 3}),
                                .offsets = Tensor(rows.offsets.data(), DType::I32, {2}),
                                .entries = Tensor(rows.entries.data(), DType::I32, {int64_t(rows.entries.size()), 4}),
                                .saved = Tensor(saved.data(), DType::F32, {int64_t(saved.size())})}));
  }
  int32_t id = 0;
  MX_TRY(ops::sample(cx, {.logits = t,
                      .params = Tensor(rows.params.data(), DType::F32, {1, 4}),
                      .seeds = Tensor(rows.seeds.data(), DType::I32, {1}),
                      .positions = Tensor(rows.draw_positions.data(), DType::I32, {1}),
                      .ids = Tensor(&id, DType::I32, {1})}));
  return id;
}

}  // namespace

Result<GenerateResult> generate(const Model& model, std::span<const int32_t> prompt, const GenerateOptions& opt,
                                const std::function<void(int32_t)>& on_token) {
  const ModelConfig& c = model.config;
  const Device dev = model.weights.device;
  const int64_t P = int64_t(prompt.size());
  MX_CHECK(P > 0, "the prompt is empty");
  MX_CHECK(opt.max_tokens >= 0, "max_tokens must be >= 0");
  const int64_t total = P + opt.max_tokens;
  MX_CHECK(total <= c.max_position_embeddings, "prompt ({}) + max_tokens ({}) exceeds the model's context of {}", P,
           opt.max_tokens, c.max_position_embeddings);
  for (int64_t i = 0; i < P; ++i)
    MX_CHECK(prompt[size_t(i)] >= 0 && prompt[size_t(i)] < c.vocab_size,
             "prompt token {} at index {} is outside the vocabulary (size {})", prompt[size_t(i)], i, c.vocab_size);

  const bool all_rows = opt.prompt_logits == PromptLogits::All;
  const int chunk = int(std::min<int64_t>(all_rows ? P : opt.prefill_chunk, P));
  const int max_rows = all_rows ? chunk : 1;
  const int blocks = int((total + opt.kv_block_size - 1) / opt.kv_block_size);
  MX_ASSIGN(KvCache kv, KvCache::create(c, dev,
                                        {.num_blocks = blocks,
                                         .block_size = opt.kv_block_size,
                                         .sliding = SlidingLayers::Ring,
                                         .max_seqs = 1,
                                         .max_call_tokens = chunk}));
  MX_ASSIGN(Workspace ws, Workspace::create(c, dev, chunk, max_rows));
  MX_ASSIGN(auto cx, ops::Context::create(dev, {.moe_activation = opt.moe_activation}));
  const int64_t max_keys = int64_t(blocks) * opt.kv_block_size;  // what the block table reaches
  MX_TRY(cx->reserve_scratch(cx->scratch_bytes_for(forward_call_shapes(c, chunk, max_rows, max_keys, false))));
  MX_ASSIGN(BatchStaging st, BatchStaging::create(dev, chunk, 1, blocks, max_rows, c.vocab_size));
  std::vector<int32_t> table;
  MX_TRY(kv.reserve(table, total));

  GenerateResult r;
  std::vector<float> logits;
  const auto t0 = Clock::now();
  for (int64_t start = 0; start < P; start += chunk) {
    const int64_t n = std::min<int64_t>(chunk, P - start);
    const bool last = start + n == P;
    std::vector<int32_t> rows;
    if (all_rows) for (int64_t i = 0; i < n; ++i) rows.push_back(int32_t(i));
    else if (last) rows.push_back(int32_t(n - 1));
    HostBatch hb{.tokens = {prompt.begin() + start, prompt.begin() + start + n}, .tables = {table}, .logit_rows = rows};
    for (int64_t i = 0; i < n; ++i) hb.positions.push_back(int32_t(start + i));
    hb.seq_index.assign(size_t(n), 0);
    MX_ASSIGN(ForwardArgs a, st.stage(hb, kv));
    MX_TRY(forward(*cx, model, ws, a));
    if (!rows.empty()) MX_TRY(st.read_logits(int64_t(rows.size()), logits));
    if (all_rows) r.all_prompt_logits.insert(r.all_prompt_logits.end(), logits.begin(), logits.end());
  }
  const auto t1 = Clock::now();
  r.prefill_seconds = std::chrono::duration<double>(t1 - t0).count();

  const size_t V = size_t(c.vocab_size);
  std::span<const float> last_row(logits.data() + logits.size() - V, V);
  std::unique_ptr<TokenCounts> counts;
  if (opt.sampling.has_penalties()) {
    counts = std::make_unique<TokenCounts>();
    counts->add_prompt({prompt.begin(), prompt.end()});
  }
  for (int step = 0; step < opt.max_tokens; ++step) {
    if (opt.keep_logits) r.logits.insert(r.logits.end(), last_row.begin(), last_row.end());
    MX_ASSIGN(const int32_t tok, sample_row(last_row, opt.sampling, int32_t(P + step), counts.get()));
    if (counts) counts->add_generated(tok);
    r.tokens.push_back(tok);
    if (on_token) on_token(tok);
    if (std::find(opt.stop_ids.begin(), opt.stop_ids.end(), tok) != opt.stop_ids.end()) {
      r.stopped = true;
      break;
    }
    if (step + 1 == opt.max_tokens) break;
    const HostBatch hb{.tokens = {tok}, .positions = {int32_t(P + step)}, .seq_index = {0}, .tables = {table},
                       .logit_rows = {0}};
    MX_ASSIGN(ForwardArgs a, st.stage(hb, kv));
    MX_TRY(forward(*cx, model, ws, a));
    MX_TRY(st.read_logits(1, logits));
    last_row = std::span<const float>(logits.data(), V);
  }
  r.decode_seconds = std::chrono::duration<double>(Clock::now() - t1).count();
  return r;
}

}  // namespace mx
