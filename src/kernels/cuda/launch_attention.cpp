// Launchers of the attention CUDA ops: qkv_rope_cache (RoPE + paged-cache write), kv_scales (an
// FP8 cache's calibration), attention by the
// split-K decode kernel (any T) and by the tiled prefill kernel (many tokens; dispatch.cpp picks);
// each checks its kernel's contract first.
#include <algorithm>

#include "kernels/cuda/launch_util.h"

namespace mx::cuda {
namespace {


// Splits for a call (the grid): enough blocks to fill the GPU, no more than the longest key range
// needs. The longest range is bounded by the block table (no host sync to read the positions);
// each token uses only the splits its own range needs (the kernel decides, kAttnMinKeysPerSplit
// keys or more each). One split where the kernel has no merge counters for every (token, kv head)
// (then the call has far more than enough blocks anyway).
int attention_splits(int64_t T, int Hkv, int64_t max_keys, bool fp8) {
  if (T * Hkv > kern::kAttnMergeCounters) return 1;
  const int64_t blocks =
      int64_t(fp8 ? heuristics::kAttentionBlocksPerSmFp8 : heuristics::kAttentionBlocksPerSm) * sm_count();
  const int64_t fill = (blocks + T * Hkv - 1) / (T * Hkv);
  const int64_t need = (max_keys + kern::kAttnMinKeysPerSplit - 1) / kern::kAttnMinKeysPerSplit;
  return int(std::clamp<int64_t>(std::min(fill, need), 1, kern::kAttnMaxSplits));
}

Status check_cache_layout(const char* kernel, const ops::KvLayer& c, const ops::TokenBatch& b) {
  MX_CHECK(kv_dtype_ok(c), "{}: the KV cache must be bf16, or f8_e4m3 with (2) f32 scales on the device (got {}, {})",
           kernel, dtype_name(c.k.dtype), dtype_name(c.v.dtype));
  MX_CHECK(c.v.dim(0) == c.k.dim(0) && c.v.dim(1) == c.k.dim(1) && c.v.dim(2) == c.k.dim(2) && c.v.dim(3) == c.k.dim(3),
           "{}: k cache {} and v cache {} differ", kernel, c.k.shape_str(), c.v.shape_str());
  MX_CHECK(c.k.dim(1) > 0 && b.block_tables.dim(1) > 0, "{}: empty block size or block table", kernel);
  return ok_status();
}

Status launch_bf16_qkv_rope_cache(const ops::QkvRopeCacheArgs& a) {
  MX_TRY(check_cache_layout("bf16_qkv_rope_cache", a.cache, a.batch));
  MX_CHECK(a.head_dim <= 256, "bf16_qkv_rope_cache: head_dim {} > 256", a.head_dim);
  const kern::RopeCacheParams p{.qkv = a.qkv.data, .inv_freq = a.rope.inv_freq.ptr<const float>(),
                                .concentration = a.rope.concentration,
                                .positions = a.batch.positions.ptr<const int32_t>(),
                                .seq_index = a.batch.seq_index.ptr<const int32_t>(),
                                .block_tables = a.batch.block_tables.ptr<const int32_t>(),
                                .k_cache = a.cache.k.data, .v_cache = a.cache.v.data,
                                .kv_scales = kv_scales_of(a.cache), .T = a.qkv.dim(0),
                                .max_blocks = a.batch.block_tables.dim(1), .block_size = a.cache.k.dim(1),
                                .H = a.n_heads, .Hkv = a.n_kv_heads, .Dh = a.head_dim};
  return kernel_status("bf16_qkv_rope_cache", kern::run_bf16_qkv_rope_cache(p, stream()));
}

Status launch_bf16_kv_scales(const ops::KvScalesArgs& a) {
  MX_CHECK(a.qkv.dtype == DType::BF16 && a.head_dim % 2 == 0, "bf16_kv_scales: bf16 qkv and an even head_dim needed");
  const kern::KvScalesParams p{.qkv = a.qkv.data, .scales = a.scales.ptr<float>(),
                               .concentration = a.concentration, .headroom = ops::kKvScaleHeadroom,
                               .fp8_max = ops::kFp8E4m3Max, .T = a.qkv.dim(0), .H = a.n_heads, .Hkv = a.n_kv_heads,
                               .Dh = a.head_dim};
  return kernel_status("bf16_kv_scales", kern::run_bf16_kv_scales(p, stream()));
}

Status launch_bf16_attention_decode(const ops::AttentionArgs& a) {
  MX_TRY(check_cache_layout("bf16_attention_decode", a.cache, a.batch));
  MX_CHECK(a.head_dim == kern::kAttnHeadDim, "bf16_attention_decode: head_dim {} != {}", a.head_dim,
           kern::kAttnHeadDim);
  MX_CHECK(a.n_heads / a.n_kv_heads <= kern::kAttnMaxGroup, "bf16_attention_decode: {} q heads per kv head > {}",
           a.n_heads / a.n_kv_heads, kern::kAttnMaxGroup);
  MX_CHECK(aligned16(a.qkv.data) && aligned16(a.cache.k.data) && aligned16(a.cache.v.data),
           "bf16_attention_decode: qkv and the cache must be 16-byte aligned");
  const int64_t T = a.qkv.dim(0);
  if (T == 0) return ok_status();
  int64_t max_keys = a.batch.block_tables.dim(1) * a.cache.k.dim(1);
  if (a.window > 0) max_keys = std::min<int64_t>(max_keys, a.window);
  const int splits = attention_splits(T, a.n_kv_heads, max_keys, a.cache.fp8());
  void* ws;
  MX_ASSIGN(ws, workspace(size_t(T) * a.n_heads * splits * kern::kAttnPartialFloats * sizeof(float)));
  const kern::AttentionParams p{.qkv = a.qkv.data, .sinks = a.sinks.data,
                                .positions = a.batch.positions.ptr<const int32_t>(),
                                .seq_index = a.batch.seq_index.ptr<const int32_t>(),
                                .block_tables = a.batch.block_tables.ptr<const int32_t>(),
                                .k_cache = a.cache.k.data, .v_cache = a.cache.v.data,
                                .kv_scales = kv_scales_of(a.cache), .out = a.out.data,
                                .partials = static_cast<float*>(ws), .T = T,
                                .max_blocks = a.batch.block_tables.dim(1), .block_size = a.cache.k.dim(1),
                                .H = a.n_heads, .Hkv = a.n_kv_heads, .window = a.window, .splits = splits,
                                .scale = a.scale, .sinks_f32 = a.sinks.dtype == DType::F32};
  return kernel_status("bf16_attention_decode", kern::run_bf16_attention_decode(p, stream()));
}

// The kernel kAuto runs: wgmma where this build's sm_90a code runs on the device.
bool use_wgmma(cuda::PrefillKernel k) {
  return k == cuda::PrefillKernel::kWgmma ||
         (k == cuda::PrefillKernel::kAuto && kern::attention_prefill_wgmma_available());
}
size_t prefill_smem_bytes(cuda::PrefillKernel k) {
  return use_wgmma(k) ? kern::attention_prefill_wgmma_smem_bytes() : kern::attention_prefill_smem_bytes();
}

// The prefill kernels' contract, without the error text (dispatch.cpp asks before routing).
bool prefill_contract(const ops::AttentionArgs& a, cuda::PrefillKernel k) {
  return a.head_dim == kern::kAttnHeadDim && a.n_heads / a.n_kv_heads <= kern::kPrefillRows &&
         a.qkv.dim(0) < (int64_t(1) << 31) && aligned16(a.qkv.data) && aligned16(a.cache.k.data) &&
         aligned16(a.cache.v.data) && aligned16(a.out.data) && a.cache.k.numel() / 8 < (int64_t(1) << 31) &&
         prefill_smem_bytes(k) <= max_smem_per_block();
}

Status launch_bf16_attention_prefill(const ops::AttentionArgs& a, cuda::PrefillKernel kernel) {
  const char* name = use_wgmma(kernel) ? "bf16_attention_prefill_wgmma" : "bf16_attention_prefill";
  MX_TRY(check_cache_layout(name, a.cache, a.batch));
  MX_CHECK(!(kernel == cuda::PrefillKernel::kWgmma && !kern::attention_prefill_wgmma_available()),
           "bf16_attention_prefill_wgmma: this build has no sm_90a code for this device");
  MX_CHECK(prefill_contract(a, kernel),
           "{}: needs head_dim {} (got {}), H/Hkv <= {} (got {}), T < 2^31, 16-byte aligned qkv, cache and out, "
           "a cache of < 2^31 chunks of 8 elements per layer, {} bytes of shared memory per block (device: {})",
           name, kern::kAttnHeadDim, a.head_dim, kern::kPrefillRows, a.n_heads / a.n_kv_heads,
           prefill_smem_bytes(kernel), max_smem_per_block());
  const int64_t T = a.qkv.dim(0);
  if (T == 0) return ok_status();
  // Tiles: at most one per tile_tokens tokens plus one per sequence change; with S sequences of
  // contiguous tokens that is <= T / tile_tokens + S. More (a sequence's tokens split apart) are
  // still served: each block loops over its share of the device-written tile list.
  const int64_t tile_tokens = kern::attention_prefill_tile_tokens(
      a.n_heads, a.n_kv_heads, use_wgmma(kernel) ? kern::kPrefillWgmmaRows : kern::kPrefillRows);
  const int64_t grid = std::min(T, (T + tile_tokens - 1) / tile_tokens + a.batch.seqs() - 1);
  void* ws;
  MX_ASSIGN(ws, workspace(size_t(T) * sizeof(int2) + 16));
  const kern::AttentionPrefillParams p{
      .qkv = a.qkv.data, .sinks = a.sinks.data, .sinks_f32 = a.sinks.dtype == DType::F32,
      .positions = a.batch.positions.ptr<const int32_t>(), .seq_index = a.batch.seq_index.ptr<const int32_t>(),
      .block_tables = a.batch.block_tables.ptr<const int32_t>(), .k_cache = a.cache.k.data,
      .v_cache = a.cache.v.data, .kv_scales = kv_scales_of(a.cache), .out = a.out.data,
      .tiles = static_cast<int2*>(ws),
      .num_tiles = reinterpret_cast<int32_t*>(static_cast<int2*>(ws) + T), .T = T,
      .max_blocks = a.batch.block_tables.dim(1), .block_size = a.cache.k.dim(1), .H = a.n_heads,
      .Hkv = a.n_kv_heads, .window = a.window, .grid_tiles = int(std::max<int64_t>(grid, 1)), .scale = a.scale};
  return kernel_status(name, use_wgmma(kernel) ? kern::run_bf16_attention_prefill_wgmma(p, stream())
                                               : kern::run_bf16_attention_prefill(p, stream()));
}

}  // namespace

Status qkv_rope_cache(const ops::QkvRopeCacheArgs& a) { return launch_bf16_qkv_rope_cache(a); }
Status kv_scales(const ops::KvScalesArgs& a) { return launch_bf16_kv_scales(a); }
Status attention_decode(const ops::AttentionArgs& a) { return launch_bf16_attention_decode(a); }
Status attention_prefill(const ops::AttentionArgs& a, PrefillKernel kernel) {
  return launch_bf16_attention_prefill(a, kernel);
}
bool attention_prefill_supported(const ops::AttentionArgs& a) { return prefill_contract(a, PrefillKernel::kAuto); }
bool attention_prefill_wgmma_available() { return kern::attention_prefill_wgmma_available(); }

}  // namespace mx::cuda
