// Host -> device staging of a forward call's arrays.
#include "runtime/batch_staging.h"

#include "kernels/owned_tensor.h"

namespace mx {

Result<BatchStaging> BatchStaging::create(Device device, int max_tokens, int max_seqs, int max_blocks, int max_rows,
                                          int vocab) {
  BatchStaging s;
  s.device_ = device;
  MX_TRY(s.make(s.tokens_, DType::I32, {max_tokens}));
  MX_TRY(s.make(s.positions_, DType::I32, {max_tokens}));
  MX_TRY(s.make(s.seq_, DType::I32, {max_tokens}));
  MX_TRY(s.make(s.tables_, DType::I32, {max_seqs, max_blocks}));
  MX_TRY(s.make(s.sliding_tables_, DType::I32, {max_seqs, max_blocks}));
  MX_TRY(s.make(s.rows_, DType::I32, {std::max(1, max_rows)}));
  MX_TRY(s.make(s.logits_, DType::F32, {std::max(1, max_rows), vocab}));
  return s;
}

Status BatchStaging::make(Tensor& t, DType dt, std::initializer_list<int64_t> shape) {
  MX_ASSIGN(t, ops::allocate_tensor(storage_, device_, dt, shape));
  return ok_status();
}

Result<Tensor> BatchStaging::put(const Tensor& buf, std::span<const int32_t> host) {
  MX_CHECK(int64_t(host.size()) <= buf.numel(), "staging: {} values for a buffer of {}", host.size(), buf.numel());
  Tensor dst = buf;
  dst.ndim = 1;
  dst.shape = {int64_t(host.size()), 0, 0, 0};
  if (!host.empty()) MX_TRY(ops::copy(dst, Tensor(const_cast<int32_t*>(host.data()), DType::I32, {int64_t(host.size())})));
  return dst;
}

// Uploads S block tables as an (S, max_blocks) tensor, zero-padded.
Result<Tensor> BatchStaging::put_tables(const Tensor& buf, const std::vector<std::vector<int32_t>>& tables) {
  const int64_t S = int64_t(tables.size()), max_blocks = buf.dim(1);
  MX_CHECK(S >= 1 && S <= buf.dim(0), "staging: {} sequences, room for {}", S, buf.dim(0));
  std::vector<int32_t> flat(size_t(S * max_blocks), 0);
  for (int64_t s = 0; s < S; ++s) {
    MX_CHECK(int64_t(tables[size_t(s)].size()) <= max_blocks, "staging: block table of {} blocks, room for {}",
             tables[size_t(s)].size(), max_blocks);
    std::copy(tables[size_t(s)].begin(), tables[size_t(s)].end(), flat.begin() + s * max_blocks);
  }
  MX_ASSIGN(Tensor t, put(buf, flat));
  t.ndim = 2;
  t.shape = {S, max_blocks, 0, 0};
  return t;
}

Result<ForwardArgs> BatchStaging::stage(const HostBatch& b, const KvCache& cache) {
  MX_ASSIGN(ForwardArgs a, stage(b, std::span<const ops::KvLayer>(cache.layers())));
  if (!cache.has_rings()) return a;
  std::vector<std::vector<int32_t>> sliding;
  for (const auto& t : b.tables) sliding.push_back(cache.sliding_table(t));
  MX_ASSIGN(a.sliding_block_tables, put_tables(sliding_tables_, sliding));
  return a;
}

Result<ForwardArgs> BatchStaging::stage(const HostBatch& b, std::span<const ops::KvLayer> cache) {
  ForwardArgs a;
  MX_ASSIGN(a.tokens, put(tokens_, b.tokens));
  MX_ASSIGN(a.batch.positions, put(positions_, b.positions));
  MX_ASSIGN(a.batch.seq_index, put(seq_, b.seq_index));
  MX_ASSIGN(a.batch.block_tables, put_tables(tables_, b.tables));
  MX_ASSIGN(a.logit_rows, put(rows_, b.logit_rows));
  a.all_rows = b.logit_rows.size() == b.tokens.size();  // every token samples (decode): rows 0..T-1?
  for (size_t i = 0; a.all_rows && i < b.logit_rows.size(); ++i) a.all_rows = b.logit_rows[i] == int32_t(i);
  a.logits = logits_.rows(0, int64_t(b.logit_rows.size()));
  a.cache = cache;
  return a;
}

Status BatchStaging::read_logits(int64_t rows, std::vector<float>& out) const {
  const Tensor src = logits_.rows(0, rows);
  out.resize(size_t(src.numel()));
  Tensor dst(out.data(), DType::F32, {rows, logits_.dim(1)});
  return ops::copy(dst, src);
}

}  // namespace mx
