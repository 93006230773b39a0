// The attention tests' inputs (cuda_bf16_attention_decode_test.cpp,
// cuda_bf16_attention_prefill_test.cpp): a paged BF16/F32 cache (or an FP8 one: the same E4M3
// codes and scales on both sides) with random contents and a block table (shuffled blocks, or
// sliding-window rings), a token batch, and one attention call on the GPU (a chosen CUDA entry
// point) and on the CPU.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <numeric>
#include <random>
#include <utility>
#include <vector>

#include "cuda_test_util.h"
#include "test_context.h"

namespace mx::test {

// bf16 output of an FP32 softmax-weighted sum: rounding gives NMSE ~1e-6 (the prefill kernel also
// rounds the probabilities to BF16 for the tensor cores: another ~1e-6); exp2 and the merge order
// differ from the double-precision reference far below that. 1e-5 = a few times margin, and a
// corrupted output (every 10th value x1.1, NMSE ~1e-3) fails it.
constexpr double kAttentionNmse = 1e-5;

struct Layout {
  int H = 64, Hkv = 8, Dh = 64, B = 16;
  int64_t width() const { return int64_t(H + 2 * Hkv) * Dh; }
};

// Block table of S sequences x max_blocks logical blocks, each a distinct physical block of a
// shuffled pool of S * max_blocks + 3 blocks.
inline std::vector<int32_t> shuffled_table(int S, int max_blocks, uint64_t seed) {
  std::vector<int32_t> perm(size_t(S) * max_blocks + 3);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), std::mt19937_64(seed));
  perm.resize(size_t(S) * max_blocks);
  return perm;
}

// Sliding-layer rings (runtime/kv_cache.cpp): sequence s owns physical blocks s·ring .. s·ring +
// ring - 1, logical block i maps to s·ring + i % ring.
inline std::vector<int32_t> ring_table(int S, int max_blocks, int ring) {
  std::vector<int32_t> t(size_t(S) * max_blocks);
  for (int s = 0; s < S; ++s)
    for (int i = 0; i < max_blocks; ++i) t[size_t(s) * max_blocks + i] = s * ring + i % ring;
  return t;
}

// Entry i of every row is block i % pool: a small cache for huge positions (no two test tokens may
// land on one slot).
inline std::vector<int32_t> pooled_table(int S, int max_blocks, int pool) {
  std::vector<int32_t> t(size_t(S) * max_blocks);
  for (size_t i = 0; i < t.size(); ++i) t[i] = int32_t(i % size_t(pool));
  return t;
}

// A paged cache of n_blocks random blocks, a block table (S, max_blocks) and a token batch.
struct Fixture {
  Layout L;
  Mirror k, v, tables, positions, seq_index;
  Mirror scales;  // FP8 cache (to_fp8): (2) f32 K, V scale
  Fixture(Layout l, int S, int max_blocks, const std::vector<int32_t>& table, int64_t n_blocks,
          const std::vector<int32_t>& pos, const std::vector<int32_t>& seq, uint64_t seed)
      : L(l) {
    const int64_t n = n_blocks * L.B * L.Hkv * L.Dh;
    k = act(random_floats(size_t(n), seed, -2.0f, 2.0f), {n_blocks, L.B, L.Hkv, L.Dh});
    v = act(random_floats(size_t(n), seed + 1, -2.0f, 2.0f), {n_blocks, L.B, L.Hkv, L.Dh});
    tables = raw(table, DType::I32, {S, max_blocks});
    positions = raw(pos, DType::I32, {int64_t(pos.size())});
    seq_index = raw(seq, DType::I32, {int64_t(seq.size())});
  }
  // S sequences in shuffled distinct blocks.
  Fixture(Layout l, int S, int max_blocks, const std::vector<int32_t>& pos, const std::vector<int32_t>& seq,
          uint64_t seed)
      : Fixture(l, S, max_blocks, shuffled_table(S, max_blocks, seed), int64_t(S) * max_blocks + 3, pos, seq, seed) {}
  ops::TokenBatch batch(bool gpu) const {
    return {.positions = gpu ? positions.gpu : positions.cpu, .seq_index = gpu ? seq_index.gpu : seq_index.cpu,
            .block_tables = gpu ? tables.gpu : tables.cpu};
  }
  ops::KvLayer cache(bool gpu) const {
    return {.k = gpu ? k.gpu : k.cpu, .v = gpu ? v.gpu : v.cpu, .scales = gpu ? scales.gpu : scales.cpu};
  }
  // Makes the cache FP8 (--kv-cache-dtype fp8): each value x becomes the E4M3 code of x / scale
  // (the values in ±2 span codes up to 2 / scale), the same bytes on both backends.
  void to_fp8(float k_scale, float v_scale) {
    for (auto [m, s] : {std::pair{&k, k_scale}, std::pair{&v, v_scale}}) {
      const std::vector<float> x = host_floats(*m);
      std::vector<uint8_t> codes(x.size());
      for (size_t i = 0; i < x.size(); ++i) codes[i] = f32_to_fp8_e4m3(x[i] * (1.0f / s));
      *m = raw(codes, DType::F8_E4M3, {m->cpu.dim(0), m->cpu.dim(1), m->cpu.dim(2), m->cpu.dim(3)});
    }
    scales = raw(std::vector<float>{k_scale, v_scale}, DType::F32, {2});
  }
};

// An FP8 cache tensor's codes (GPU: downloaded; CPU: the host bytes).
inline std::vector<uint8_t> fp8_codes(const Mirror& m, bool gpu) {
  std::vector<uint8_t> c(size_t(m.cpu.numel()));
  if (gpu)
    EXPECT_TRUE(ops::copy(Tensor(c.data(), DType::F8_E4M3, {m.gpu.numel()}), m.gpu).ok());
  else
    std::memcpy(c.data(), m.host.data(), c.size());
  return c;
}

// Two FP8 caches written from nearly equal values (the GPU rounds to BF16 before it quantizes, and
// its qkv carries BF16 roundings, absolute errors of ~2^-8 of the largest values): decoded codes
// within an E4M3 step (1/8 relative) plus 1/64 of the largest |code value|, and at most `max_moved`
// of the codes different. A write to a wrong slot or head shows as values far apart.
inline bool fp8_codes_close(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b, double max_moved = 0.05) {
  if (a.size() != b.size()) return false;
  float largest = 0.0f;
  for (size_t i = 0; i < a.size(); ++i)
    largest = std::max({largest, std::fabs(fp8_e4m3_to_f32(a[i])), std::fabs(fp8_e4m3_to_f32(b[i]))});
  size_t moved = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] == b[i]) continue;
    const float x = fp8_e4m3_to_f32(a[i]), y = fp8_e4m3_to_f32(b[i]);
    if (!(std::fabs(x - y) <= 0.125f * std::max(std::fabs(x), std::fabs(y)) + largest / 64)) {
      ADD_FAILURE() << "code " << i << ": " << x << " vs " << y << " (largest " << largest << ")";
      return false;
    }
    ++moved;
  }
  if (double(moved) > max_moved * double(a.size())) ADD_FAILURE() << moved << " of " << a.size() << " codes differ";
  return double(moved) <= max_moved * double(a.size());
}

// Positions first..first+n-1 of sequence `seq`, appended to a batch.
inline void append_run(std::vector<int32_t>& pos, std::vector<int32_t>& seq, int s, int first, int n) {
  for (int i = 0; i < n; ++i) pos.push_back(first + i), seq.push_back(s);
}

using AttentionFn = std::function<Status(const ops::AttentionArgs&)>;

// Attention of the batch by `gpu_fn` and by the CPU reference; returns (gpu, cpu) outputs.
inline std::pair<std::vector<float>, std::vector<float>> run_attention(const Fixture& f, int window, uint64_t seed,
                                                                       const AttentionFn& gpu_fn) {
  const int64_t T = f.positions.cpu.dim(0);
  Mirror qkv = act(random_floats(size_t(T * f.L.width()), seed, -1.5f, 1.5f), {T, f.L.width()});
  Mirror sinks = bf16_weights(random_floats(size_t(f.L.H), seed + 1, -1.0f, 3.0f), {f.L.H});
  Mirror out = act(random_floats(size_t(T * f.L.H * f.L.Dh), seed + 2), {T, int64_t(f.L.H) * f.L.Dh});
  for (bool gpu : {true, false}) {
    const ops::AttentionArgs a{.qkv = gpu ? qkv.gpu : qkv.cpu, .sinks = gpu ? sinks.gpu : sinks.cpu,
                               .n_heads = f.L.H, .n_kv_heads = f.L.Hkv, .head_dim = f.L.Dh, .window = window,
                               .scale = 0.125f, .batch = f.batch(gpu), .cache = f.cache(gpu),
                               .out = gpu ? out.gpu : out.cpu};
    const Status st = gpu ? gpu_fn(a) : ops::attention(test::ctx(), a);
    EXPECT_TRUE(st.ok()) << st.message();
  }
  return {download(out.gpu), host_floats(out)};
}

}  // namespace mx::test
