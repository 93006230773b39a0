// generate(): host-side staging of the per-call token arrays, chunked prefill, decode loop.
#include "runtime/generate.h"

#include <algorithm>
#include <chrono>

#include "model/forward.h"
#include "runtime/kv_cache.h"

namespace mx {
namespace {

using Clock = std::chrono::steady_clock;

// Device copies of the small per-call arrays (tokens, positions, sequence rows, block table,
// logit rows) and of the logits; on the CPU the host arrays are used directly.
class Staging {
 public:
  static Result<Staging> create(Device device, int max_tokens, int max_blocks, int max_rows, int vocab) {
    Staging s;
    s.device_ = device;
    MX_TRY(s.make(s.tokens_, DType::I32, {max_tokens}));
    MX_TRY(s.make(s.positions_, DType::I32, {max_tokens}));
    MX_TRY(s.make(s.seq_, DType::I32, {max_tokens}));
    MX_TRY(s.make(s.table_, DType::I32, {1, max_blocks}));
    MX_TRY(s.make(s.rows_, DType::I32, {max_rows}));
    MX_TRY(s.make(s.logits_, DType::F32, {max_rows, vocab}));
    return s;
  }

  // Uploads one call's arrays and returns the ForwardArgs over them.
  Result<ForwardArgs> stage(std::span<const int32_t> tokens, int64_t pos0, const std::vector<int32_t>& table,
                            std::span<const int32_t> rows, std::span<const ops::KvLayer> cache) {
    const int64_t T = int64_t(tokens.size()), R = int64_t(rows.size());
    std::vector<int32_t> pos(static_cast<size_t>(T)), seq(size_t(T), 0), padded_table(size_t(table_.dim(1)), 0);
    for (int64_t i = 0; i < T; ++i) pos[size_t(i)] = int32_t(pos0 + i);
    std::copy(table.begin(), table.end(), padded_table.begin());
    ForwardArgs a;
    MX_ASSIGN(a.tokens, put(tokens_, tokens));
    MX_ASSIGN(a.batch.positions, put(positions_, pos));
    MX_ASSIGN(a.batch.seq_index, put(seq_, seq));
    MX_ASSIGN(a.batch.block_tables, put(table_, padded_table));
    a.batch.block_tables.ndim = 2;
    a.batch.block_tables.shape = {1, table_.dim(1), 0, 0};
    MX_ASSIGN(a.logit_rows, put(rows_, rows));
    a.logits = logits_.rows(0, R);
    a.cache = cache;
    return a;
  }

  Status read_logits(int64_t rows, std::vector<float>& out) const {
    const Tensor src = logits_.rows(0, rows);
    out.resize(size_t(src.numel()));
    Tensor dst(out.data(), DType::F32, {rows, logits_.dim(1)});
    return ops::copy(dst, src);
  }

 private:
  Status make(Tensor& t, DType dt, std::initializer_list<int64_t> shape) {
    Tensor probe(nullptr, dt, shape, device_);
    MX_ASSIGN(ops::Buffer b, ops::Buffer::allocate(device_, probe.nbytes()));
    t = b.view(dt, shape);
    storage_.push_back(std::move(b));
    return ok_status();
  }
  Result<Tensor> put(const Tensor& buf, std::span<const int32_t> host) {
    Tensor dst = buf;
    dst.ndim = 1;
    dst.shape = {int64_t(host.size()), 0, 0, 0};
    MX_TRY(ops::copy(dst, Tensor(const_cast<int32_t*>(host.data()), DType::I32, {int64_t(host.size())})));
    return dst;
  }

  Device device_ = Device::CPU;
  std::vector<ops::Buffer> storage_;
  Tensor tokens_, positions_, seq_, table_, rows_, logits_;
};

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
  MX_ASSIGN(KvCache kv, KvCache::create(c, dev, blocks, opt.kv_block_size));
  MX_ASSIGN(Workspace ws, Workspace::create(c, dev, chunk, max_rows));
  MX_ASSIGN(Staging st, Staging::create(dev, chunk, blocks, max_rows, c.vocab_size));
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
    MX_ASSIGN(ForwardArgs a, st.stage(prompt.subspan(size_t(start), size_t(n)), start, table, rows, kv.layers()));
    MX_TRY(forward(model, ws, a));
    if (!rows.empty()) MX_TRY(st.read_logits(int64_t(rows.size()), logits));
    if (all_rows) r.all_prompt_logits.insert(r.all_prompt_logits.end(), logits.begin(), logits.end());
  }
  const auto t1 = Clock::now();
  r.prefill_seconds = std::chrono::duration<double>(t1 - t0).count();

  Sampler sampler(opt.sampling);
  const size_t V = size_t(c.vocab_size);
  std::span<const float> last_row(logits.data() + logits.size() - V, V);
  for (int step = 0; step < opt.max_tokens; ++step) {
    if (opt.keep_logits) r.logits.insert(r.logits.end(), last_row.begin(), last_row.end());
    const int32_t tok = sampler.sample(last_row);
    r.tokens.push_back(tok);
    if (on_token) on_token(tok);
    if (std::find(opt.stop_ids.begin(), opt.stop_ids.end(), tok) != opt.stop_ids.end()) {
      r.stopped = true;
      break;
    }
    if (step + 1 == opt.max_tokens) break;
    const int32_t one[1] = {tok}, row0[1] = {0};
    MX_ASSIGN(ForwardArgs a, st.stage(one, P + step, table, row0, kv.layers()));
    MX_TRY(forward(model, ws, a));
    MX_TRY(st.read_logits(1, logits));
    last_row = std::span<const float>(logits.data(), V);
  }
  r.decode_seconds = std::chrono::duration<double>(Clock::now() - t1).count();
  return r;
}

}  // namespace mx
