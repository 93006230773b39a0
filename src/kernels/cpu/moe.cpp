// CPU reference for the mixture of experts: router top-k + softmax over the k (moe_router: rmsnorm
// -> router linear -> top-k), and the MXFP4 experts (gate_up with interleaved rows -> clamped SwiGLU
// with the +1 -> down), weighted and summed into the residual (GPTOSS_SPEC §3, §4.6, §4.7). Each
// expert's weight rows are decoded once per call and applied to every token routed to it. With
// MoeActivation::FP8 the expert inputs (x and the SwiGLU output) are quantized to MX E4M3 and
// read back first, as the CUDA kernels of that mode do.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "core/dtype.h"
#include "core/parallel.h"
#include "kernels/cpu/cpu_ops.h"

namespace mx::cpu {
namespace {

// Decodes row `row` of expert `e` of an MXFP4 matrix (E, N, K/32, 16) into K floats.
void decode_row(const Tensor& blocks, const Tensor& scales, int64_t e, int64_t row, float* out) {
  const int64_t N = blocks.dim(1), G = blocks.dim(2);
  const uint8_t* b = blocks.ptr<const uint8_t>() + ((e * N + row) * G) * 16;
  const uint8_t* s = scales.ptr<const uint8_t>() + (e * N + row) * G;
  for (int64_t g = 0; g < G; ++g) decode_mxfp4_block(b + g * 16, s[g], out + g * 32);
}

float dot(const float* a, const float* b, int64_t n) {
  float acc = 0;
  for (int64_t i = 0; i < n; ++i) acc += a[i] * b[i];
  return acc;
}

// Rounds each 32-block of row[0..n) through MX E4M3 (quantize_mx_e4m3 and back).
void round_mx_e4m3(float* row, int64_t n) {
  for (int64_t b = 0; b < n; b += 32) {
    uint8_t codes[32], s;
    quantize_mx_e4m3(row + b, codes, &s);
    const float scale = e8m0_to_f32(s);
    for (int i = 0; i < 32; ++i) row[b + i] = fp8_e4m3_to_f32(codes[i]) * scale;
  }
}

}  // namespace

Status router_topk(const ops::RouterTopkArgs& a) {
  const int64_t T = a.logits.dim(0), E = a.logits.dim(1), K = a.ids.dim(1);
  for (int64_t t = 0; t < T; ++t) {
    std::vector<int32_t> order(static_cast<size_t>(E));
    std::iota(order.begin(), order.end(), 0);
    auto logit = [&](int32_t e) { return load_f32(a.logits, t * E + e); };
    std::stable_sort(order.begin(), order.end(), [&](int32_t x, int32_t y) { return logit(x) > logit(y); });
    const float m = logit(order[0]);
    double sum = 0;
    std::vector<double> ex(static_cast<size_t>(K));
    for (int64_t k = 0; k < K; ++k) sum += ex[size_t(k)] = std::exp(double(logit(order[size_t(k)])) - m);
    for (int64_t k = 0; k < K; ++k) {
      a.ids.ptr<int32_t>()[t * K + k] = order[size_t(k)];
      a.weights.ptr<float>()[t * K + k] = float(ex[size_t(k)] / sum);
    }
  }
  return ok_status();
}

Status moe_router(const ops::MoeRouterArgs& a) {
  MX_TRY(rmsnorm({.x = a.x, .weight = a.norm_weight, .eps = a.eps, .out = a.xn}));
  MX_TRY(linear({.x = a.xn, .w = a.w, .bias = a.bias, .out = a.logits, .w_scales = a.w_scales}));
  if (a.ids.empty()) return ok_status();  // logits only (ops::moe selects)
  return router_topk({.logits = a.logits, .ids = a.ids, .weights = a.weights});
}

Status moe(const ops::MoeArgs& a) {
  const int64_t T = a.x.dim(0), D = a.x.dim(1), K = a.ids.dim(1);
  const int64_t E = a.w.gate_up_blocks.dim(0), F2 = a.w.gate_up_blocks.dim(1), F = F2 / 2;
  const int32_t* ids = a.ids.ptr<const int32_t>();
  const float* x = a.x.ptr<const float>();
  for (int64_t i = 0; i < T * K; ++i)
    MX_CHECK(ids[i] >= 0 && ids[i] < E, "expert id {} at index {} out of range [0, {})", ids[i], i, E);
  const bool fp8 = a.activation == ops::MoeActivation::FP8;
  MX_CHECK(!fp8 || (D % 32 == 0 && F % 32 == 0), "moe: fp8 activations need D, F multiples of 32 (D={} F={})", D, F);
  std::vector<float> xq;
  if (fp8) {
    xq.assign(x, x + T * D);
    parallel_for(T, 16, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) round_mx_e4m3(xq.data() + t * D, D);
    });
    x = xq.data();
  }

  // (token, slot) pairs grouped by expert, in ascending token order.
  std::vector<std::vector<int64_t>> routed(static_cast<size_t>(E));
  for (int64_t i = 0; i < T * K; ++i) routed[size_t(ids[i])].push_back(i);

  std::vector<float> act(static_cast<size_t>(T * K * F));  // SwiGLU output per (token, slot)
  std::vector<float> y(static_cast<size_t>(T * K * D));    // expert output per (token, slot)
  for (int64_t e = 0; e < E; ++e) {
    const auto& list = routed[size_t(e)];
    if (list.empty()) continue;  // an expert with no tokens costs nothing
    // gate_up: rows 2j (gate) and 2j+1 (up) produce SwiGLU output j.
    parallel_for(F, 8, [&](int64_t j0, int64_t j1) {
      std::vector<float> wg(static_cast<size_t>(D)), wu(static_cast<size_t>(D));
      for (int64_t j = j0; j < j1; ++j) {
        decode_row(a.w.gate_up_blocks, a.w.gate_up_scales, e, 2 * j, wg.data());
        decode_row(a.w.gate_up_blocks, a.w.gate_up_scales, e, 2 * j + 1, wu.data());
        const float bg = load_f32(a.w.gate_up_bias, e * F2 + 2 * j);
        const float bu = load_f32(a.w.gate_up_bias, e * F2 + 2 * j + 1);
        for (int64_t i : list) {
          const float* xt = x + (i / K) * D;
          float g = dot(xt, wg.data(), D) + bg, u = dot(xt, wu.data(), D) + bu;
          g = std::min(g, a.swiglu_limit);                            // gate: upper clamp only
          u = std::clamp(u, -a.swiglu_limit, a.swiglu_limit);         // up: both sides
          const float glu = g / (1.0f + std::exp(-a.swiglu_alpha * g));  // g · σ(α g)
          act[size_t(i * F + j)] = glu * (u + 1.0f);                  // the +1 on the up branch
        }
      }
    });
    if (fp8)
      for (int64_t i : list) round_mx_e4m3(act.data() + i * F, F);
    parallel_for(D, 8, [&](int64_t d0, int64_t d1) {
      std::vector<float> wd(static_cast<size_t>(F));
      for (int64_t d = d0; d < d1; ++d) {
        decode_row(a.w.down_blocks, a.w.down_scales, e, d, wd.data());
        const float b = load_f32(a.w.down_bias, e * D + d);
        for (int64_t i : list) y[size_t(i * D + d)] = dot(act.data() + i * F, wd.data(), F) + b;
      }
    });
  }
  float* res = a.residual.ptr<float>();
  const float* w = a.weights.ptr<const float>();
  parallel_for(T, 4, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t)
      for (int64_t d = 0; d < D; ++d) {
        float sum = 0;
        for (int64_t k = 0; k < K; ++k) sum += w[t * K + k] * y[size_t((t * K + k) * D + d)];
        res[t * D + d] += sum;
      }
  });
  return ok_status();
}

}  // namespace mx::cpu
