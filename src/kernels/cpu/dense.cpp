// CPU reference for the dense ops: embedding lookup, RMSNorm, linear (x·W^T + b, optionally of
// rmsnorm(x)), row gather. Dense weights are BF16 or MXFP4 (--mxfp4-layers), decoded exactly by
// core/dtype.h decode_mxfp4_block.
#include <cmath>
#include <cstring>
#include <vector>

#include "core/parallel.h"
#include "kernels/cpu/cpu_ops.h"

namespace mx::cpu {
namespace {

// Row n of a dense weight (ops.h: BF16, or MXFP4 blocks + scales) as Kin floats.
void weight_row(const Tensor& w, const Tensor& scales, int64_t n, int64_t Kin, float* row) {
  if (!ops::is_mxfp4(scales)) {
    for (int64_t k = 0; k < Kin; ++k) row[k] = load_f32(w, n * Kin + k);
    return;
  }
  const int64_t G = Kin / 32;
  const uint8_t* blocks = w.ptr<const uint8_t>() + n * G * 16;
  const uint8_t* s = scales.ptr<const uint8_t>() + n * G;
  for (int64_t g = 0; g < G; ++g) decode_mxfp4_block(blocks + g * 16, s[g], row + g * 32);
}

}  // namespace

Status embed(const ops::EmbedArgs& a) {
  const int64_t T = a.ids.dim(0), D = a.out.dim(1), V = a.table.dim(0);
  const int32_t* ids = a.ids.ptr<const int32_t>();
  for (int64_t t = 0; t < T; ++t)
    MX_CHECK(ids[t] >= 0 && ids[t] < V, "token id {} at index {} is outside the vocabulary (size {})", ids[t], t, V);
  float* out = a.out.ptr<float>();
  parallel_for(T, 16, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) weight_row(a.table, a.table_scales, ids[t], D, out + t * D);
  });
  return ok_status();
}

namespace {

// out (T, D) = rmsnorm of the rows of x (T, D); out may alias x.
void rmsnorm_rows(const float* x, const Tensor& weight, float eps, int64_t T, int64_t D, float* out) {
  parallel_for(T, 8, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      double ss = 0;
      for (int64_t d = 0; d < D; ++d) ss += double(x[t * D + d]) * x[t * D + d];
      const float r = 1.0f / std::sqrt(float(ss / double(D)) + eps);
      for (int64_t d = 0; d < D; ++d) out[t * D + d] = (x[t * D + d] * r) * load_f32(weight, d);
    }
  });
}

}  // namespace

Status rmsnorm(const ops::RmsNormArgs& a) {
  rmsnorm_rows(a.x.ptr<const float>(), a.weight, a.eps, a.x.dim(0), a.x.dim(1), a.out.ptr<float>());
  return ok_status();
}

Status linear(const ops::LinearArgs& a) {
  const int64_t T = a.x.dim(0), Kin = a.x.dim(1), N = a.w.dim(0);
  const float* x = a.x.ptr<const float>();
  std::vector<float> normed;  // with a.norm: rmsnorm(x), the values ops::rmsnorm would write
  if (!a.norm.weight.empty()) {
    normed.resize(size_t(T * Kin));
    rmsnorm_rows(x, a.norm.weight, a.norm.eps, T, Kin, normed.data());
    x = normed.data();
  }
  float* out = a.out.ptr<float>();
  const bool accumulate = a.accumulate == ops::Accumulate::IntoOut;
  // Each chunk of output features converts its weight rows once and reuses them for all tokens.
  parallel_for(N, 16, [&](int64_t n0, int64_t n1) {
    std::vector<float> row(static_cast<size_t>(Kin));
    for (int64_t n = n0; n < n1; ++n) {
      weight_row(a.w, a.w_scales, n, Kin, row.data());
      const float b = a.bias.empty() ? 0.0f : load_f32(a.bias, n);
      for (int64_t t = 0; t < T; ++t) {
        const float* xt = x + t * Kin;
        float acc = 0;
        for (int64_t k = 0; k < Kin; ++k) acc += xt[k] * row[size_t(k)];
        float& o = out[t * N + n];
        o = accumulate ? o + (acc + b) : acc + b;
      }
    }
  });
  return ok_status();
}

Status gather_rows(const ops::GatherRowsArgs& a) {
  const int64_t R = a.rows.dim(0), D = a.x.dim(1), T = a.x.dim(0);
  const int32_t* rows = a.rows.ptr<const int32_t>();
  for (int64_t r = 0; r < R; ++r) {
    MX_CHECK(rows[r] >= 0 && rows[r] < T, "gather row {} out of range [0, {})", rows[r], T);
    std::memmove(a.out.ptr<float>() + r * D, a.x.ptr<const float>() + int64_t(rows[r]) * D, size_t(D) * 4);
  }
  return ok_status();
}

}  // namespace mx::cpu
