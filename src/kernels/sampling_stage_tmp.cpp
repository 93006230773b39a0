// TEMPORARY (replaced by the sampling-stage ops of branch sampling20): CPU-only versions of
// logprobs_topk, logits_process and logprobs_chosen so that the engine builds and its CPU tests run.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "kernels/ops.h"

namespace mx::ops {

Status logprobs_topk(const LogprobsTopkArgs& a) {
  MX_CHECK(a.logits.device == Device::CPU, "logprobs_topk: CPU only in this build");
  const int64_t R = a.logits.dim(0), V = a.logits.dim(1);
  for (int64_t r = 0; r < R; ++r) {
    const int k = a.rows_k.ptr<const int32_t>()[r];
    if (k < 0) continue;
    const float* l = a.logits.ptr<const float>() + r * V;
    const float m = *std::max_element(l, l + V);
    double z = 0;
    for (int64_t v = 0; v < V; ++v) z += std::exp(double(l[v]) - m);
    const float lse = float(m + std::log(z));
    a.lse.ptr<float>()[r] = lse;
    std::vector<int32_t> ids(static_cast<size_t>(V));
    std::iota(ids.begin(), ids.end(), 0);
    const int kk = int(std::min<int64_t>(k, V));
    std::partial_sort(ids.begin(), ids.begin() + kk, ids.end(),
                      [&](int32_t x, int32_t y) { return l[x] > l[y] || (l[x] == l[y] && x < y); });
    for (int i = 0; i < kk; ++i) {
      a.top_ids.ptr<int32_t>()[r * kMaxTopLogprobs + i] = ids[size_t(i)];
      a.top_logprobs.ptr<float>()[r * kMaxTopLogprobs + i] = l[ids[size_t(i)]] - lse;
    }
  }
  return ok_status();
}

Status logits_process(const LogitsProcessArgs& a) {
  MX_CHECK(a.logits.device == Device::CPU, "logits_process: CPU only in this build");
  const int64_t R = a.logits.dim(0), V = a.logits.dim(1);
  const auto* e = reinterpret_cast<const LogitsEntry*>(a.entries.data);
  for (int64_t r = 0; r < R; ++r) {
    float* l = a.logits.ptr<float>() + r * V;
    const float* pen = a.penalties.ptr<const float>() + 3 * r;
    const int32_t lo = a.offsets.ptr<const int32_t>()[r], hi = a.offsets.ptr<const int32_t>()[r + 1];
    for (int32_t i = lo; i < hi; ++i) a.saved.ptr<float>()[i] = l[e[i].token];
    for (int32_t i = lo; i < hi; ++i) {
      float& x = l[e[i].token];
      if (e[i].kind == LogitsEntryKind::Penalty) {
        if (e[i].aux || e[i].count > 0) x = x > 0 ? x / pen[0] : x * pen[0];
        x -= pen[2] * float(e[i].count) + (e[i].count > 0 ? pen[1] : 0.0f);
      }
    }
    for (int32_t i = lo; i < hi; ++i)
      if (e[i].kind == LogitsEntryKind::Bias) {
        float b;
        std::memcpy(&b, &e[i].aux, 4);
        l[e[i].token] += b;
      }
    for (int32_t i = lo; i < hi; ++i)
      if (e[i].kind == LogitsEntryKind::Ban) l[e[i].token] = -INFINITY;
  }
  return ok_status();
}

Status logprobs_chosen(const LogprobsChosenArgs& a) {
  MX_CHECK(a.logits.device == Device::CPU, "logprobs_chosen: CPU only in this build");
  const int64_t R = a.logits.dim(0), V = a.logits.dim(1);
  const auto* e = a.entries.empty() ? nullptr : reinterpret_cast<const LogitsEntry*>(a.entries.data);
  for (int64_t r = 0; r < R; ++r) {
    if (a.rows_k.ptr<const int32_t>()[r] < 0) continue;
    const int32_t id = a.ids.ptr<const int32_t>()[r];
    float raw = a.logits.ptr<const float>()[r * V + id];
    const int32_t lo = a.offsets.ptr<const int32_t>()[r], hi = a.offsets.ptr<const int32_t>()[r + 1];
    for (int32_t i = lo; i < hi && e; ++i)
      if (e[i].token == id) {
        raw = a.saved.ptr<const float>()[i];
        break;
      }
    a.logprobs.ptr<float>()[r] = raw - a.lse.ptr<const float>()[r];
  }
  return ok_status();
}

}  // namespace mx::ops
