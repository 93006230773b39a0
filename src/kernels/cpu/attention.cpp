// CPU reference for attention: YaRN RoPE + paged KV-cache write (qkv_projection: linear first), and
// attention with learned sinks and an optional sliding window over the paged cache (GPTOSS_SPEC
// §4.4, §4.5). The cache is f32, or FP8 E4M3 codes of value / scale (--kv-cache-dtype fp8) whose
// scales kv_scales computes.
#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

#include "core/parallel.h"
#include "kernels/cpu/cpu_ops.h"

namespace mx::cpu {
namespace {

// Address of (token position, kv head) in one layer's K or V cache.
struct CacheIndex {
  const ops::TokenBatch& batch;
  int64_t block_size, n_kv_heads, head_dim, max_blocks;

  int64_t offset(int64_t seq, int64_t pos, int64_t kv_head) const {
    const int32_t block = batch.block_tables.ptr<const int32_t>()[seq * max_blocks + pos / block_size];
    return ((int64_t(block) * block_size + pos % block_size) * n_kv_heads + kv_head) * head_dim;
  }
};

CacheIndex cache_index(const ops::TokenBatch& batch, const ops::KvLayer& cache) {
  return CacheIndex{batch, cache.k.dim(1), cache.k.dim(2), cache.k.dim(3), batch.block_tables.dim(1)};
}

// A layer's K or V rows as floats: the f32 cache in place, or the FP8 codes times the scale
// (through a table of the 256 codes).
class CacheReader {
 public:
  CacheReader(const Tensor& t, const ops::KvLayer& c, int which, int64_t head_dim) : t_(t), dh_(size_t(head_dim)) {
    if (!c.fp8()) return;
    const float s = c.scales.ptr<const float>()[which];
    for (int code = 0; code < 256; ++code) lut_[size_t(code)] = fp8_e4m3_to_f32(uint8_t(code)) * s;
  }
  bool fp8() const { return t_.dtype == DType::F8_E4M3; }
  // The row at element offset `off`; buf (head_dim floats) holds a decoded FP8 row.
  const float* row(int64_t off, std::vector<float>& buf) const {
    if (!fp8()) return t_.ptr<const float>() + off;
    const uint8_t* codes = t_.ptr<const uint8_t>() + off;
    buf.resize(dh_);
    for (size_t d = 0; d < dh_; ++d) buf[d] = lut_[codes[d]];
    return buf.data();
  }

 private:
  const Tensor& t_;
  size_t dh_;
  std::array<float, 256> lut_{};
};

// Writes one row of k or v at element offset `off`: copied into an f32 cache, or as the E4M3 codes
// of x · (1 / scale) (what the CUDA kernels store: the same product, rounded to nearest even).
void write_row(const Tensor& t, const ops::KvLayer& c, int which, int64_t off, const float* x, int64_t n) {
  if (!c.fp8()) {
    std::copy_n(x, n, t.ptr<float>() + off);
    return;
  }
  const float inv = 1.0f / c.scales.ptr<const float>()[which];
  uint8_t* codes = t.ptr<uint8_t>() + off;
  for (int64_t i = 0; i < n; ++i) codes[i] = f32_to_fp8_e4m3(x[i] * inv);
}

void rotate(float* x, const float* cos, const float* sin, int64_t half) {
  for (int64_t i = 0; i < half; ++i) {
    const float x1 = x[i], x2 = x[i + half];
    x[i] = x1 * cos[i] - x2 * sin[i];
    x[i + half] = x2 * cos[i] + x1 * sin[i];
  }
}

}  // namespace

Status qkv_rope_cache(const ops::QkvRopeCacheArgs& a) {
  const int64_t T = a.qkv.dim(0), H = a.n_heads, Hkv = a.n_kv_heads, Dh = a.head_dim, half = Dh / 2;
  const int64_t row = (H + 2 * Hkv) * Dh;
  const CacheIndex idx = cache_index(a.batch, a.cache);
  const int32_t* pos = a.batch.positions.ptr<const int32_t>();
  const int32_t* seq = a.batch.seq_index.ptr<const int32_t>();
  const float* inv_freq = a.rope.inv_freq.ptr<const float>();
  float* qkv = a.qkv.ptr<float>();
  parallel_for(T, 4, [&](int64_t t0, int64_t t1) {
    std::vector<float> cos(static_cast<size_t>(half)), sin(static_cast<size_t>(half));
    for (int64_t t = t0; t < t1; ++t) {
      for (int64_t i = 0; i < half; ++i) {
        const float angle = float(pos[t]) * inv_freq[i];  // fp32 product, like the reference
        cos[size_t(i)] = std::cos(angle) * a.rope.concentration;
        sin[size_t(i)] = std::sin(angle) * a.rope.concentration;
      }
      float* r = qkv + t * row;
      for (int64_t h = 0; h < H + Hkv; ++h) rotate(r + h * Dh, cos.data(), sin.data(), half);
      for (int64_t g = 0; g < Hkv; ++g) {
        const int64_t off = idx.offset(seq[t], pos[t], g);
        write_row(a.cache.k, a.cache, 0, off, r + (H + g) * Dh, Dh);
        write_row(a.cache.v, a.cache, 1, off, r + (H + Hkv + g) * Dh, Dh);
      }
    }
  });
  return ok_status();
}

Status kv_scales(const ops::KvScalesArgs& a) {
  const int64_t T = a.qkv.dim(0), H = a.n_heads, Hkv = a.n_kv_heads, Dh = a.head_dim, half = Dh / 2;
  const int64_t row = (H + 2 * Hkv) * Dh;
  float k_max = 0.0f, v_max = 0.0f;
  for (int64_t t = 0; t < T; ++t) {
    const float* k = a.qkv.ptr<const float>() + t * row + H * Dh;
    for (int64_t h = 0; h < Hkv; ++h)
      for (int64_t i = 0; i < half; ++i) {
        const float x1 = k[h * Dh + i], x2 = k[h * Dh + i + half];
        k_max = std::max(k_max, std::sqrt(x1 * x1 + x2 * x2));
      }
    for (int64_t i = 0; i < Hkv * Dh; ++i) v_max = std::max(v_max, std::fabs(k[Hkv * Dh + i]));
  }
  const float k_amax = a.concentration * k_max;
  float* s = a.scales.ptr<float>();
  s[0] = k_amax > 0.0f ? ops::kKvScaleHeadroom * k_amax / ops::kFp8E4m3Max : 1.0f;
  s[1] = v_max > 0.0f ? ops::kKvScaleHeadroom * v_max / ops::kFp8E4m3Max : 1.0f;
  return ok_status();
}

Status qkv_projection(const ops::QkvProjectionArgs& a) {
  MX_TRY(linear({.x = a.x, .w = a.w, .bias = a.bias, .out = a.qkv, .norm = a.norm, .w_scales = a.w_scales}));
  return qkv_rope_cache({.qkv = a.qkv,
                         .n_heads = a.n_heads,
                         .n_kv_heads = a.n_kv_heads,
                         .head_dim = a.head_dim,
                         .rope = a.rope,
                         .batch = a.batch,
                         .cache = a.cache});
}

Status attention(const ops::AttentionArgs& a) {
  const int64_t T = a.qkv.dim(0), H = a.n_heads, Hkv = a.n_kv_heads, Dh = a.head_dim;
  const int64_t row = (H + 2 * Hkv) * Dh, group = H / Hkv;
  const CacheIndex idx = cache_index(a.batch, a.cache);
  const int32_t* pos = a.batch.positions.ptr<const int32_t>();
  const int32_t* seq = a.batch.seq_index.ptr<const int32_t>();
  const CacheReader kc(a.cache.k, a.cache, 0, Dh), vc(a.cache.v, a.cache, 1, Dh);
  parallel_for(T * H, 4, [&](int64_t i0, int64_t i1) {
    std::vector<float> logits, kbuf, vbuf;
    std::vector<double> acc(static_cast<size_t>(Dh));
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t t = i / H, h = i % H, g = h / group;
      const int64_t p = pos[t];
      const int64_t lo = a.window > 0 ? std::max<int64_t>(0, p - a.window + 1) : 0;
      const float* q = a.qkv.ptr<const float>() + t * row + h * Dh;
      logits.resize(size_t(p - lo + 1));
      const float sink = load_f32(a.sinks, h);
      float m = sink;
      for (int64_t j = lo; j <= p; ++j) {
        const float* k = kc.row(idx.offset(seq[t], j, g), kbuf);
        float dot = 0;
        for (int64_t d = 0; d < Dh; ++d) dot += q[d] * k[d];
        logits[size_t(j - lo)] = dot * a.scale;
        m = std::max(m, logits[size_t(j - lo)]);
      }
      double denom = std::exp(double(sink) - m);
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t j = lo; j <= p; ++j) {
        const double w = std::exp(double(logits[size_t(j - lo)]) - m);
        denom += w;
        const float* v = vc.row(idx.offset(seq[t], j, g), vbuf);
        for (int64_t d = 0; d < Dh; ++d) acc[size_t(d)] += w * v[d];
      }
      float* o = a.out.ptr<float>() + t * H * Dh + h * Dh;
      for (int64_t d = 0; d < Dh; ++d) o[d] = float(acc[size_t(d)] / denom);
    }
  });
  return ok_status();
}

}  // namespace mx::cpu
