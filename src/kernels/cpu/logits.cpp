// CPU reference of the engine step's sampling-stage logits ops (ops.h): logprobs_topk (fp64
// log-sum-exp, top ids by a partial sort on (logit desc, id asc)), logits_process (the three
// entry phases in order) and logprobs_chosen. NaN logits count as -inf (kernels/logits_rule.h).
#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "core/parallel.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/logits_rule.h"

namespace mx::cpu {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// log Σ exp(x) over a row, NaN as -inf; ±inf when the row's max is not finite.
float log_sum_exp(const float* l, int64_t V) {
  float m = -kInf;
  for (int64_t v = 0; v < V; ++v)
    if (l[v] > m) m = l[v];
  if (!std::isfinite(m)) return m;
  double sum = 0;
  for (int64_t v = 0; v < V; ++v)
    if (l[v] > -kInf) sum += std::exp(double(l[v]) - double(m));
  return float(double(m) + std::log(sum));
}

}  // namespace

Status logprobs_topk(const ops::LogprobsTopkArgs& a) {
  const int64_t R = a.logits.dim(0), V = a.logits.dim(1);
  parallel_for(R, 1, [&](int64_t r0, int64_t r1) {
    std::vector<int32_t> ids(static_cast<size_t>(V));
    for (int64_t r = r0; r < r1; ++r) {
      const int32_t k = a.rows_k.ptr<const int32_t>()[r];
      if (k < 0) continue;
      const float* l = a.logits.ptr<const float>() + r * V;
      const float lse = log_sum_exp(l, V);
      a.lse.ptr<float>()[r] = lse;
      const int64_t n = std::min<int64_t>({k, ops::kMaxTopLogprobs, V});
      std::iota(ids.begin(), ids.end(), 0);
      std::partial_sort(ids.begin(), ids.begin() + n, ids.end(), [&](int32_t x, int32_t y) {
        const int32_t kx = logit_key(l[x]), ky = logit_key(l[y]);
        return kx > ky || (kx == ky && x < y);
      });
      for (int64_t j = 0; j < n; ++j) {
        const int32_t id = ids[size_t(j)];
        a.top_ids.ptr<int32_t>()[r * ops::kMaxTopLogprobs + j] = id;
        // The ranked value (NaN as -inf), recovered from its key as the kernel does.
        a.top_logprobs.ptr<float>()[r * ops::kMaxTopLogprobs + j] = ukey_logit(logit_ukey(l[id])) - lse;
      }
    }
  });
  return ok_status();
}

Status logits_process(const ops::LogitsProcessArgs& a) {
  const int64_t R = a.logits.dim(0), V = a.logits.dim(1);
  const auto* entries = reinterpret_cast<const ops::LogitsEntry*>(a.entries.data);
  const int32_t* off = a.offsets.ptr<const int32_t>();
  float* saved = a.saved.ptr<float>();
  for (int64_t r = 0; r < R; ++r) {
    float* l = a.logits.ptr<float>() + r * V;
    const float* pen = a.penalties.ptr<const float>() + r * 3;
    for (int32_t i = off[r]; i < off[r + 1]; ++i) saved[i] = l[entries[i].token];
    for (int32_t i = off[r]; i < off[r + 1]; ++i) {
      const ops::LogitsEntry& e = entries[i];
      if (e.kind == ops::LogitsEntryKind::Penalty)
        l[e.token] = penalized_logit(l[e.token], pen[0], pen[1], pen[2], e.count, e.aux);
    }
    for (int32_t i = off[r]; i < off[r + 1]; ++i)
      if (entries[i].kind == ops::LogitsEntryKind::Bias) l[entries[i].token] += std::bit_cast<float>(entries[i].aux);
    for (int32_t i = off[r]; i < off[r + 1]; ++i)
      if (entries[i].kind == ops::LogitsEntryKind::Ban) l[entries[i].token] = -kInf;
    bool others = false;  // MaskOthers: the words without a Mask entry are forbidden
    for (int32_t i = off[r]; i < off[r + 1]; ++i) others |= entries[i].kind == ops::LogitsEntryKind::MaskOthers;
    std::vector<uint32_t> words(others ? size_t((V + 31) / 32) : 0, 0u);
    for (int32_t i = off[r]; i < off[r + 1]; ++i) {
      if (entries[i].kind != ops::LogitsEntryKind::Mask) continue;
      if (others) {
        words[size_t(entries[i].token / 32)] = uint32_t(entries[i].aux);
        continue;
      }
      for (int b = 0; b < 32 && entries[i].token + b < V; ++b)
        if (!((uint32_t(entries[i].aux) >> b) & 1u)) l[entries[i].token + b] = -kInf;
    }
    for (int64_t id = 0; others && id < V; ++id)
      if (!((words[size_t(id / 32)] >> (id % 32)) & 1u)) l[id] = -kInf;
  }
  return ok_status();
}

Status logprobs_chosen(const ops::LogprobsChosenArgs& a) {
  const int64_t R = a.logits.dim(0), V = a.logits.dim(1);
  const auto* entries = reinterpret_cast<const ops::LogitsEntry*>(a.entries.data);
  const int32_t* off = a.offsets.ptr<const int32_t>();
  for (int64_t r = 0; r < R; ++r) {
    if (a.rows_k.ptr<const int32_t>()[r] < 0) continue;
    const int32_t id = a.ids.ptr<const int32_t>()[r];
    float raw = a.logits.ptr<const float>()[r * V + id];
    for (int32_t i = off[r]; i < off[r + 1]; ++i)
      if (entries[i].token == id) {
        raw = a.saved.ptr<const float>()[i];
        break;
      }
    a.logprobs.ptr<float>()[r] = raw - a.lse.ptr<const float>()[r];
  }
  return ok_status();
}

}  // namespace mx::cpu
