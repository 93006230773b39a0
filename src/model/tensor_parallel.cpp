// TpPlan (the split of heads, expert blocks and vocabulary over the ranks) and tp_slice (a rank's
// part of one weight, copied by strided row copies from wherever the full tensor lives).
#include "model/tensor_parallel.h"

#include <algorithm>
#include <array>

namespace mx {

TpRange TpPlan::split(int64_t n, int size, int rank) {
  const int64_t base = n / size, extra = n % size;
  const int64_t begin = rank * base + std::min<int64_t>(rank, extra);
  return {begin, begin + base + (rank < extra ? 1 : 0)};
}

Result<TpPlan> TpPlan::make(const ModelConfig& c, int size) {
  MX_CHECK(size >= 1 && size <= 8, "--tensor-parallel-size {}: 1 to 8 supported", size);
  MX_CHECK(c.num_key_value_heads % size == 0 && c.num_attention_heads % size == 0,
           "--tensor-parallel-size {}: the model's {} kv heads and {} q heads must divide evenly over the ranks",
           size, c.num_key_value_heads, c.num_attention_heads);
  MX_CHECK(c.intermediate_size % 32 == 0 && c.intermediate_size / 32 >= size,
           "--tensor-parallel-size {}: the expert width {} must hold at least one block of 32 per rank", size,
           c.intermediate_size);
  MX_CHECK(c.vocab_size >= size, "--tensor-parallel-size {}: vocabulary of {}", size, c.vocab_size);
  TpPlan p;
  p.c_ = c;
  p.size_ = size;
  return p;
}

TpRange TpPlan::heads(int r) const { return split(c_.num_attention_heads, size_, r); }
TpRange TpPlan::kv_heads(int r) const { return split(c_.num_key_value_heads, size_, r); }
TpRange TpPlan::ff_blocks(int r) const { return split(c_.intermediate_size / 32, size_, r); }
TpRange TpPlan::vocab(int r) const { return split(c_.vocab_size, size_, r); }

std::vector<int64_t> TpPlan::vocab_starts() const {
  std::vector<int64_t> s;
  for (int r = 0; r < size_; ++r) s.push_back(vocab(r).begin);
  s.push_back(c_.vocab_size);
  return s;
}

ModelConfig TpPlan::rank_config(int r) const {
  ModelConfig c = c_;
  c.num_attention_heads = int(heads(r).size());
  c.num_key_value_heads = int(kv_heads(r).size());
  c.intermediate_size = int(ff_blocks(r).size() * 32);
  return c;
}

std::string TpPlan::describe() const {
  std::string s;
  for (int r = 0; r < size_; ++r) {
    const TpRange h = heads(r), kv = kv_heads(r), f = ff_blocks(r), v = vocab(r);
    s += fmt::format("{}rank {}: q heads {}..{}, kv heads {}..{}, expert columns {}..{} ({} blocks), vocabulary "
                     "{}..{}",
                     r ? "; " : "", r, h.begin, h.end - 1, kv.begin, kv.end - 1, f.begin * 32, f.end * 32 - 1,
                     f.size(), v.begin, v.end - 1);
  }
  return s;
}

namespace {

// For each of `outer` rows of `row_bytes` bytes: the byte ranges `pieces`, concatenated.
struct Pieces {
  int64_t outer = 1, row_bytes = 0;
  std::vector<std::pair<int64_t, int64_t>> pieces;  // (offset, length) in bytes
  std::array<int64_t, 4> shape{};
};

int64_t bytes_per_row_of_dim0(const Tensor& t) { return int64_t(t.nbytes()) / t.dim(0); }

Pieces pieces_of(const Tensor& full, TpWeight kind, const TpPlan& plan, int rank) {
  Pieces p;
  p.shape = full.shape;
  const int64_t total = int64_t(full.nbytes());
  auto rows = [&](int64_t first, int64_t count) {  // rows of dim 0, appended
    const int64_t rb = bytes_per_row_of_dim0(full);
    p.pieces.push_back({first * rb, count * rb});
  };
  switch (kind) {
    case TpWeight::Replicated:
    case TpWeight::RankZeroOnly:
      p.row_bytes = total;
      p.pieces = {{0, total}};
      return p;
    case TpWeight::QkvRows: {
      // rows: H·Dh q rows, then Hkv·Dh k rows, then Hkv·Dh v rows; Dh from the q rows' share.
      const int64_t H = plan.config().num_attention_heads, Hkv = plan.config().num_key_value_heads;
      const int64_t Dh = full.dim(0) / (H + 2 * Hkv);
      const TpRange h = plan.heads(rank), kv = plan.kv_heads(rank);
      p.row_bytes = total;
      rows(h.begin * Dh, h.size() * Dh);
      rows(H * Dh + kv.begin * Dh, kv.size() * Dh);
      rows((H + Hkv) * Dh + kv.begin * Dh, kv.size() * Dh);
      p.shape[0] = (h.size() + 2 * kv.size()) * Dh;
      return p;
    }
    case TpWeight::QRows:
    case TpWeight::KvRows:
    case TpWeight::Sinks:
    case TpWeight::VocabRows: {
      const int64_t heads = kind == TpWeight::QRows || kind == TpWeight::Sinks ? plan.config().num_attention_heads
                                                                               : plan.config().num_key_value_heads;
      const TpRange r = kind == TpWeight::VocabRows ? plan.vocab(rank)
                        : kind == TpWeight::KvRows  ? plan.kv_heads(rank)
                                                    : plan.heads(rank);
      const int64_t per = kind == TpWeight::VocabRows ? 1 : full.dim(0) / heads;  // rows per head (Dh; sinks 1)
      p.row_bytes = total;
      rows(r.begin * per, r.size() * per);
      p.shape[0] = r.size() * per;
      return p;
    }
    case TpWeight::OColumns: {  // (D, H·Dh) bf16 or MXFP4 bytes: columns in whole heads
      const int64_t H = plan.config().num_attention_heads;
      const TpRange h = plan.heads(rank);
      p.outer = full.dim(0);
      p.row_bytes = total / p.outer;
      const int64_t per_head = p.row_bytes / H;
      p.pieces = {{h.begin * per_head, h.size() * per_head}};
      p.shape[1] = full.dim(1) / H * h.size();
      return p;
    }
    case TpWeight::GateUpRows: {  // (E, 2F, ...): rows [2·32·b0, 2·32·b1) per expert
      const TpRange b = plan.ff_blocks(rank);
      const int64_t F2 = full.dim(1);
      p.outer = full.dim(0);
      p.row_bytes = total / p.outer;
      const int64_t per_row = p.row_bytes / F2;
      p.pieces = {{2 * 32 * b.begin * per_row, 2 * 32 * b.size() * per_row}};
      p.shape[1] = 2 * 32 * b.size();
      return p;
    }
    case TpWeight::DownBlocks: {  // (E, D, G, [16]): blocks [b0, b1) of every row
      const TpRange b = plan.ff_blocks(rank);
      p.outer = full.dim(0) * full.dim(1);
      p.row_bytes = total / p.outer;
      const int64_t per_block = p.row_bytes / full.dim(2);
      p.pieces = {{b.begin * per_block, b.size() * per_block}};
      p.shape[2] = b.size();
      return p;
    }
  }
  return p;
}

}  // namespace

Result<Tensor> tp_slice(const Tensor& full, TpWeight kind, const TpPlan& plan, int rank, Device device,
                        std::vector<ops::Buffer>& storage) {
  const Pieces p = pieces_of(full, kind, plan, rank);
  int64_t width = 0;
  for (const auto& [off, len] : p.pieces) width += len;
  MX_ASSIGN(ops::Buffer buf, ops::Buffer::allocate(device, size_t(p.outer * width)));
  Tensor out = full;
  out.data = buf.data();
  out.device = device;
  out.shape = p.shape;
  if (kind == TpWeight::RankZeroOnly && rank != 0) {
    std::vector<uint8_t> zeros(size_t(width), 0);
    MX_TRY(ops::copy_2d(buf.data(), size_t(width), device, zeros.data(), size_t(width), Device::CPU, size_t(width), 1));
  } else {
    int64_t at = 0;
    for (const auto& [off, len] : p.pieces) {
      MX_TRY(ops::copy_2d(static_cast<char*>(buf.data()) + at, size_t(width), device,
                          static_cast<const char*>(full.data) + off, size_t(p.row_bytes), full.device, size_t(len),
                          size_t(p.outer)));
      at += len;
    }
  }
  storage.push_back(std::move(buf));
  return out;
}

}  // namespace mx
