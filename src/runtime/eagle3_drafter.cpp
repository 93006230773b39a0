// The EAGLE-3 drafting loop after each engine step (spec §4, chain mode, greedy drafts).
#include "runtime/eagle3_drafter.h"

#include <algorithm>

#include "kernels/owned_tensor.h"

namespace mx {
namespace {

// A tensor's elements as one dimension.
Tensor flat(Tensor t) {
  const int64_t n = t.numel();
  t.ndim = 1;
  t.shape = {n, 0, 0, 0};
  return t;
}

}  // namespace

Result<std::unique_ptr<Eagle3Drafter>> Eagle3Drafter::create(ops::Context& cx, const Eagle3Draft& draft,
                                                             Device device, const Args& args) {
  MX_CHECK(args.seats > 0 && args.max_tokens >= args.seats && args.max_blocks > 0 && args.num_blocks > 0 &&
               args.block_size > 0 && args.k > 0,
           "eagle3 drafter: bad sizes (seats {}, tokens {}, blocks {} x {}, k {})", args.seats, args.max_tokens,
           args.num_blocks, args.block_size, args.k);
  std::unique_ptr<Eagle3Drafter> d(new Eagle3Drafter(cx, draft, device, args));
  MX_TRY(d->allocate());
  return d;
}

Status Eagle3Drafter::allocate() {
  const Eagle3Config& c = draft_.config;
  const int64_t T = args_.max_tokens, R = args_.seats, D = c.hidden_size;
  // Steps 2..k reach k - 1 positions past the last kept one; they may straddle one more block.
  per_seat_ = (args_.k + args_.block_size - 1) / args_.block_size + 1;
  const int64_t blocks = int64_t(args_.num_blocks) + int64_t(args_.seats) * per_seat_;
  const DType act = ops::act_dtype(device_);
  auto make = [&](Tensor& t, DType dt, std::initializer_list<int64_t> shape) -> Status {
    MX_ASSIGN(t, ops::allocate_tensor(storage_, device_, dt, shape));
    return ok_status();
  };
  MX_TRY(make(cache_.k, act, {blocks, args_.block_size, c.num_key_value_heads, c.head_dim}));
  MX_TRY(make(cache_.v, act, {blocks, args_.block_size, c.num_key_value_heads, c.head_dim}));
  MX_TRY(make(tables_, DType::I32, {R, args_.max_blocks}));
  MX_TRY(make(staged_, DType::I32, {4 * T + 4 * R}));
  MX_ASSIGN(stage_, ops::Buffer::allocate_pinned(size_t(4 * T + 4 * R) * 4));
  for (Tensor* t : {&seeds_, &draw_, &ids_, &step_tokens_}) MX_TRY(make(*t, DType::I32, {R}));
  MX_TRY(make(draft_ids_, DType::I32, {int64_t(args_.k), R}));
  MX_TRY(make(params_, DType::F32, {R, 4}));
  MX_TRY(make(logits_, DType::F32, {R, c.draft_vocab_size}));
  MX_TRY(make(features_, act, {T, c.use_aux_hidden_state ? c.fc_in() : D}));  // fc's input, or the hidden itself
  MX_TRY(make(hidden_[0], act, {T, D}));
  MX_TRY(make(hidden_[1], act, {R, D}));
  MX_ASSIGN(Eagle3Workspace ws, Eagle3Workspace::create(c, device_, int(T), int(R)));
  // The draft's largest calls: pass 1 over T tokens, its fc (the widest input), the MLP, R logit rows.
  const ops::CallShapes shapes{.max_tokens = T,
                               .max_rows = R,
                               .max_in_features = std::max<int64_t>({c.fc_in(), D, int64_t(c.num_attention_heads) * c.head_dim,
                                                                     c.intermediate_size}),
                               .max_keys = int64_t(args_.max_blocks) * args_.block_size,
                               .hidden = D,
                               .heads = c.num_attention_heads,
                               .kv_heads = c.num_key_value_heads};
  MX_TRY(cx_.reserve_scratch(cx_.scratch_bytes_for(shapes)));
  ws_ = std::make_unique<Eagle3Workspace>(std::move(ws));
  // Greedy rows: temperature 0 (the other settings unused); seeds and draw positions zero.
  std::vector<float> params(size_t(R * 4), 0.0f);
  MX_TRY(ops::copy(params_, Tensor(params.data(), DType::F32, {R, 4})));
  std::vector<int32_t> zeros(size_t(R), 0);
  MX_TRY(ops::copy(seeds_, Tensor(zeros.data(), DType::I32, {R})));
  MX_TRY(ops::copy(draw_, Tensor(zeros.data(), DType::I32, {R})));
  host_tables_.assign(size_t(R * args_.max_blocks), 0);
  MX_TRY(ops::copy(tables_, Tensor(host_tables_.data(), DType::I32, {R, args_.max_blocks})));
  drafts_.assign(size_t(R), {});
  d2t_ = draft_.weights.draft_to_target_host;
  d2t_dev_ = draft_.weights.draft_to_target;
  return ok_status();
}

// The seat's table row: the sequence's blocks, then its own blocks up to the last position drafted;
// only the entries that changed are copied.
Status Eagle3Drafter::set_table(int seat, const std::vector<int32_t>& table, int64_t last_position) {
  const int64_t B = args_.block_size, W = args_.max_blocks;
  MX_CHECK(last_position < W * B, "eagle3 drafter: position {} past the block table ({} positions)", last_position,
           W * B);
  int32_t* row = host_tables_.data() + int64_t(seat) * W;
  const int64_t used = std::min<int64_t>(int64_t(table.size()), W), need = std::max(used, last_position / B + 1);
  MX_CHECK(need - used <= per_seat_, "eagle3 drafter: {} blocks past the sequence's {} (room for {})", need - used,
           used, per_seat_);
  int64_t lo = need, hi = 0;
  for (int64_t i = 0; i < need; ++i) {
    const int32_t b = i < used ? table[size_t(i)] : int32_t(args_.num_blocks + int64_t(seat) * per_seat_ + (i - used));
    if (row[i] != b) row[i] = b, lo = std::min(lo, i), hi = i + 1;
  }
  if (lo >= hi) return ok_status();
  return ops::copy(flat(tables_.rows(seat, 1)).rows(lo, hi - lo),
                   Tensor(row + lo, DType::I32, {hi - lo}));
}

Status Eagle3Drafter::greedy(int64_t R, int j) {
  MX_TRY(ops::sample(cx_, {.logits = logits_.rows(0, R), .params = params_.rows(0, R), .seeds = seeds_.rows(0, R),
                      .positions = draw_.rows(0, R), .ids = ids_.rows(0, R)}));
  MX_TRY(ops::copy_async(cx_, flat(draft_ids_.rows(j, 1)).rows(0, R), ids_.rows(0, R)));
  return ops::take_prev_tokens(cx_, {.tokens = step_tokens_.rows(0, R), .from = ids_.rows(0, R), .prev = d2t_dev_});
}

Status Eagle3Drafter::run(const Tensor& aux, std::span<const Pass> passes) {
  for (auto& d : drafts_) d.clear();
  const int64_t W = args_.max_blocks, B = args_.block_size;
  // Pass 1: every kept position of every sequence; a logit row at the last one of those that draft
  // (none drafting: only the draft's KV is written).
  std::vector<int32_t> tokens, positions, seats, feature_rows, rows;
  std::vector<size_t> drafting;  // passes with drafts, in logit-row order
  int steps = 0;                 // draft tokens per drafting sequence this call (the most asked)
  for (size_t i = 0; i < passes.size(); ++i) {
    const Pass& p = passes[i];
    MX_CHECK(p.seat >= 0 && p.seat < args_.seats && p.table, "eagle3 drafter: bad pass for seat {}", p.seat);
    if (p.tokens.empty()) continue;
    for (int64_t j = 0; j < int64_t(p.tokens.size()); ++j) {
      tokens.push_back(p.tokens[size_t(j)]);
      positions.push_back(int32_t(p.start + j));
      seats.push_back(p.seat);
      feature_rows.push_back(int32_t(p.first_row + j));
    }
    if (p.drafts > 0) {
      rows.push_back(int32_t(tokens.size()) - 1);
      drafting.push_back(i);
      steps = std::max(steps, std::min(p.drafts, args_.k));
    }
  }
  if (tokens.empty()) return ok_status();
  // Every drafting sequence runs all the steps (one uniform batch): within its table and room.
  for (size_t r = 0; r < rows.size(); ++r)
    steps = int(std::min<int64_t>(steps, W * B - positions[size_t(rows[r])]));
  for (const Pass& p : passes) {
    if (p.tokens.empty()) continue;
    const int64_t last = p.start + int64_t(p.tokens.size()) - 1;
    MX_TRY(set_table(p.seat, *p.table, last + (p.drafts > 0 ? std::max(steps - 1, 0) : 0)));
  }
  const int64_t T = int64_t(tokens.size()), R = int64_t(rows.size()), cap = args_.max_tokens;
  MX_CHECK(T <= cap, "eagle3 drafter: {} tokens, room for {}", T, cap);
  // Stage: [tokens | positions | seats | feature rows] (cap each), [rows | positions2 | seats2 | iota] (R_max each).
  int32_t* st = static_cast<int32_t*>(stage_.data());
  const int64_t Rm = args_.seats, o2 = 4 * cap;
  std::copy(tokens.begin(), tokens.end(), st);
  std::copy(positions.begin(), positions.end(), st + cap);
  std::copy(seats.begin(), seats.end(), st + 2 * cap);
  std::copy(feature_rows.begin(), feature_rows.end(), st + 3 * cap);
  for (int64_t r = 0; r < R; ++r) {
    st[o2 + r] = rows[size_t(r)];
    st[o2 + Rm + r] = positions[size_t(rows[size_t(r)])] + 1;  // step 2's position
    st[o2 + 2 * Rm + r] = seats[size_t(rows[size_t(r)])];
    st[o2 + 3 * Rm + r] = int32_t(r);
  }
  MX_TRY(ops::copy_async(cx_, staged_, Tensor(st, DType::I32, {o2 + 4 * Rm})));
  auto part = [&](int64_t at, int64_t n) { return staged_.rows(at, n); };
  const Tensor feat_rows = part(3 * cap, T), logit_rows = part(o2, R);
  MX_TRY(ops::gather_rows(cx_, {.x = aux, .rows = feat_rows, .out = features_.rows(0, T)}));
  const ops::TokenBatch batch{.positions = part(cap, T), .seq_index = part(2 * cap, T), .block_tables = tables_};
  const bool uses_fc = draft_.config.use_aux_hidden_state;
  MX_TRY(eagle3_step(cx_, draft_, *ws_, {.tokens = part(0, T), .features = uses_fc ? features_.rows(0, T) : Tensor(),
                                    .hidden = uses_fc ? Tensor() : features_.rows(0, T), .batch = batch, .cache = cache_,
                                    .logit_rows = logit_rows, .logits = logits_.rows(0, R),
                                    .hidden_out = hidden_[0].rows(0, T), .kv_only = R == 0}));
  if (R == 0) return ok_status();
  MX_TRY(greedy(R, 0));
  // Steps 2..: one row per drafting sequence, all on the device: the draft before (its target id),
  // the next position, the hidden state its row handed on (updated in place).
  const Tensor h = hidden_[1].rows(0, R), pos2 = part(o2 + Rm, R);
  MX_TRY(ops::gather_rows(cx_, {.x = hidden_[0].rows(0, T), .rows = logit_rows, .out = h}));
  const ops::TokenBatch b2{.positions = pos2, .seq_index = part(o2 + 2 * Rm, R), .block_tables = tables_};
  for (int j = 1; j < steps; ++j) {
    MX_TRY(eagle3_step(cx_, draft_, *ws_, {.tokens = step_tokens_.rows(0, R), .hidden = h, .batch = b2, .cache = cache_,
                                      .logit_rows = part(o2 + 3 * Rm, R), .logits = logits_.rows(0, R),
                                      .hidden_out = h}));
    MX_TRY(greedy(R, j));
    MX_TRY(ops::add_i32(cx_, {.x = pos2, .value = 1}));
  }
  std::vector<int32_t> ids(size_t(steps * Rm));  // rows of Rm (the seats), the first R used
  MX_TRY(ops::copy(Tensor(ids.data(), DType::I32, {int64_t(steps), Rm}), draft_ids_.rows(0, steps)));
  for (int64_t r = 0; r < R; ++r) {
    const Pass& p = passes[drafting[size_t(r)]];
    for (int j = 0; j < std::min(steps, p.drafts); ++j) {
      const int32_t id = ids[size_t(j * Rm + r)];
      MX_CHECK(id >= 0 && id < int32_t(d2t_.size()), "eagle3 drafter: draft id {} outside the draft vocabulary", id);
      drafts_[size_t(p.seat)].push_back(d2t_[size_t(id)]);
    }
  }
  return ok_status();
}

}  // namespace mx
