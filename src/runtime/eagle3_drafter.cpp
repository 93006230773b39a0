// The EAGLE-3 drafting loop after each engine step (spec §4, chain mode, greedy drafts).
#include "runtime/eagle3_drafter.h"

#include <algorithm>

namespace mx {

Result<std::unique_ptr<Eagle3Drafter>> Eagle3Drafter::create(const Eagle3Draft& draft, Device device,
                                                             const Args& args) {
  MX_CHECK(args.seats > 0 && args.max_tokens >= args.seats && args.max_blocks > 0 && args.num_blocks > 0 &&
               args.block_size > 0 && args.k > 0,
           "eagle3 drafter: bad sizes (seats {}, tokens {}, blocks {} x {}, k {})", args.seats, args.max_tokens,
           args.num_blocks, args.block_size, args.k);
  MX_CHECK(draft.config.use_aux_hidden_state,
           "eagle3 drafter: drafts without aux hidden states (use_aux_hidden_state: false) do not run in rounds yet");
  std::unique_ptr<Eagle3Drafter> d(new Eagle3Drafter(draft, device, args));
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
    const Tensor probe(nullptr, dt, shape, device_);
    MX_ASSIGN(ops::Buffer b, ops::Buffer::allocate(device_, probe.nbytes()));
    t = b.view(dt, shape);
    storage_.push_back(std::move(b));
    return ok_status();
  };
  MX_TRY(make(cache_.k, act, {blocks, args_.block_size, c.num_key_value_heads, c.head_dim}));
  MX_TRY(make(cache_.v, act, {blocks, args_.block_size, c.num_key_value_heads, c.head_dim}));
  MX_TRY(make(tables_, DType::I32, {R, args_.max_blocks}));
  for (Tensor* t : {&tokens_, &positions_, &seats_, &feature_rows_}) MX_TRY(make(*t, DType::I32, {T}));
  for (Tensor* t : {&rows_, &seeds_, &draw_, &ids_}) MX_TRY(make(*t, DType::I32, {R}));
  MX_TRY(make(params_, DType::F32, {R, 4}));
  MX_TRY(make(logits_, DType::F32, {R, c.draft_vocab_size}));
  MX_TRY(make(features_, act, {T, c.fc_in()}));
  MX_TRY(make(hidden_[0], act, {T, D}));
  MX_TRY(make(hidden_[1], act, {T, D}));
  MX_ASSIGN(Eagle3Workspace ws, Eagle3Workspace::create(c, device_, int(T), int(R)));
  ws_ = std::make_unique<Eagle3Workspace>(std::move(ws));
  // Greedy rows: temperature 0 (the other settings unused); seeds and draw positions zero.
  std::vector<float> params(size_t(R * 4), 0.0f);
  MX_TRY(ops::copy(params_, Tensor(params.data(), DType::F32, {R, 4})));
  MX_TRY(upload(seeds_, std::vector<int32_t>(size_t(R), 0)));
  MX_TRY(upload(draw_, std::vector<int32_t>(size_t(R), 0)));
  host_tables_.assign(size_t(R * args_.max_blocks), 0);
  MX_TRY(upload(tables_, host_tables_));
  drafts_.assign(size_t(R), {});
  d2t_ = draft_.weights.draft_to_target_host;
  return ok_status();
}

Status Eagle3Drafter::upload(const Tensor& dst, const std::vector<int32_t>& v) {
  if (v.empty()) return ok_status();
  const Tensor head = dst.ndim == 1 ? dst.rows(0, int64_t(v.size())) : dst;
  return ops::copy(head, Tensor(const_cast<int32_t*>(v.data()), DType::I32, {int64_t(v.size())}));
}

// The seat's table row: the sequence's blocks, then its own blocks up to the last position drafted.
Status Eagle3Drafter::set_table(int seat, const std::vector<int32_t>& table, int64_t last_position) {
  const int64_t B = args_.block_size, W = args_.max_blocks;
  MX_CHECK(last_position < W * B, "eagle3 drafter: position {} past the block table ({} positions)", last_position,
           W * B);
  int32_t* row = host_tables_.data() + int64_t(seat) * W;
  const int64_t used = std::min<int64_t>(int64_t(table.size()), W);
  std::copy(table.begin(), table.begin() + used, row);
  const int64_t need = last_position / B + 1;
  MX_CHECK(need - used <= per_seat_, "eagle3 drafter: {} blocks past the sequence's {} (room for {})", need - used,
           used, per_seat_);
  for (int64_t i = used; i < need; ++i) row[i] = int32_t(args_.num_blocks + int64_t(seat) * per_seat_ + (i - used));
  Tensor dst = tables_.rows(seat, 1);
  return ops::copy(dst, Tensor(row, DType::I32, {1, W}));
}

Result<std::vector<int32_t>> Eagle3Drafter::greedy(int64_t R) {
  MX_TRY(ops::sample({.logits = logits_.rows(0, R), .params = params_.rows(0, R), .seeds = seeds_.rows(0, R),
                      .positions = draw_.rows(0, R), .ids = ids_.rows(0, R)}));
  std::vector<int32_t> ids(static_cast<size_t>(R));
  MX_TRY(ops::copy(Tensor(ids.data(), DType::I32, {R}), ids_.rows(0, R)));
  for (int32_t& id : ids) {
    MX_CHECK(id >= 0 && id < int32_t(d2t_.size()), "eagle3 drafter: draft id {} outside the draft vocabulary", id);
    id = d2t_[size_t(id)];
  }
  return ids;
}

Status Eagle3Drafter::run(const Tensor& aux, std::span<const Pass> passes) {
  for (auto& d : drafts_) d.clear();
  // Pass 1: every kept position of every sequence; a logit row at the last one of those that draft.
  std::vector<int32_t> tokens, positions, seats, feature_rows, rows;
  std::vector<size_t> drafting;  // passes with drafts, in logit-row order
  int max_drafts = 0;
  for (size_t i = 0; i < passes.size(); ++i) {
    const Pass& p = passes[i];
    const int64_t n = int64_t(p.tokens.size());
    if (n == 0) continue;
    MX_CHECK(p.seat >= 0 && p.seat < args_.seats && p.table, "eagle3 drafter: bad pass for seat {}", p.seat);
    const int drafts = std::min(p.drafts, args_.k);
    MX_TRY(set_table(p.seat, *p.table, p.start + n - 1 + std::max(drafts - 1, 0)));
    for (int64_t j = 0; j < n; ++j) {
      tokens.push_back(p.tokens[size_t(j)]);
      positions.push_back(int32_t(p.start + j));
      seats.push_back(p.seat);
      feature_rows.push_back(int32_t(p.first_row + j));
    }
    if (drafts > 0) {
      rows.push_back(int32_t(tokens.size()) - 1);
      drafting.push_back(i);
      max_drafts = std::max(max_drafts, drafts);
    }
  }
  if (tokens.empty()) return ok_status();
  MX_CHECK(int64_t(tokens.size()) <= args_.max_tokens, "eagle3 drafter: {} tokens, room for {}", tokens.size(),
           args_.max_tokens);
  const int64_t T = int64_t(tokens.size()), R = int64_t(rows.size());
  MX_TRY(upload(tokens_, tokens));
  MX_TRY(upload(positions_, positions));
  MX_TRY(upload(seats_, seats));
  MX_TRY(upload(feature_rows_, feature_rows));
  MX_TRY(upload(rows_, rows));
  MX_TRY(ops::gather_rows({.x = aux, .rows = feature_rows_.rows(0, T), .out = features_.rows(0, T)}));
  const ops::TokenBatch batch{.positions = positions_.rows(0, T), .seq_index = seats_.rows(0, T),
                              .block_tables = tables_};
  int cur = 0;
  MX_TRY(eagle3_step(draft_, *ws_, {.tokens = tokens_.rows(0, T), .features = features_.rows(0, T), .batch = batch,
                                    .cache = cache_, .logit_rows = rows_.rows(0, R),
                                    .logits = logits_.rows(0, R), .hidden_out = hidden_[cur].rows(0, T)}));
  if (R == 0) return ok_status();
  MX_ASSIGN(std::vector<int32_t> ids, greedy(R));
  std::vector<int32_t> last_pos(static_cast<size_t>(R));
  for (int64_t r = 0; r < R; ++r) {
    drafts_[size_t(passes[drafting[size_t(r)]].seat)].push_back(ids[size_t(r)]);
    last_pos[size_t(r)] = positions[size_t(rows[size_t(r)])];
  }
  // Steps 2..k: one row per sequence that still drafts, at the next position, fed the draft before
  // and the hidden state its row handed on.
  std::vector<int32_t> prev_rows = rows;  // each drafting sequence's row in hidden_[cur]
  std::vector<size_t> alive(drafting.size());
  for (size_t i = 0; i < alive.size(); ++i) alive[i] = i;
  for (int step = 2; step <= max_drafts; ++step) {
    std::vector<size_t> next;
    tokens.clear(), positions.clear(), seats.clear(), rows.clear();
    std::vector<int32_t> from;
    for (size_t a : alive) {
      const Pass& p = passes[drafting[a]];
      if (std::min(p.drafts, args_.k) < step) continue;
      tokens.push_back(drafts_[size_t(p.seat)].back());
      positions.push_back(++last_pos[a]);
      seats.push_back(p.seat);
      from.push_back(prev_rows[a]);
      rows.push_back(int32_t(next.size()));
      next.push_back(a);
    }
    if (next.empty()) break;
    const int64_t n = int64_t(next.size());
    MX_TRY(upload(tokens_, tokens));
    MX_TRY(upload(positions_, positions));
    MX_TRY(upload(seats_, seats));
    MX_TRY(upload(feature_rows_, from));
    MX_TRY(upload(rows_, rows));
    const int nxt = 1 - cur;
    // The hidden states handed on: rows `from` of the last step's output, gathered into hidden_[nxt]'s
    // head, then the step overwrites them in place (hidden_out may alias hidden).
    MX_TRY(ops::gather_rows({.x = hidden_[cur], .rows = feature_rows_.rows(0, n), .out = hidden_[nxt].rows(0, n)}));
    const ops::TokenBatch b{.positions = positions_.rows(0, n), .seq_index = seats_.rows(0, n), .block_tables = tables_};
    MX_TRY(eagle3_step(draft_, *ws_, {.tokens = tokens_.rows(0, n), .hidden = hidden_[nxt].rows(0, n), .batch = b,
                                      .cache = cache_, .logit_rows = rows_.rows(0, n), .logits = logits_.rows(0, n),
                                      .hidden_out = hidden_[nxt].rows(0, n)}));
    cur = nxt;
    MX_ASSIGN(ids, greedy(n));
    std::vector<size_t> alive2;
    for (int64_t r = 0; r < n; ++r) {
      const size_t a = next[size_t(r)];
      drafts_[size_t(passes[drafting[a]].seat)].push_back(ids[size_t(r)]);
      prev_rows[a] = int32_t(r);
      alive2.push_back(a);
    }
    alive = std::move(alive2);
  }
  return ok_status();
}

}  // namespace mx
