// Launchers of the attention CUDA ops: qkv_rope_cache (RoPE + paged-cache write), kv_scales (an
// FP8 cache's calibration), attention by the
// split-K decode kernel (any T) and by the tiled prefill kernel (many tokens; dispatch.cpp picks);
// each checks its kernel's contract first.
#include <algorithm>
#include <string>

#include "kernels/cuda/launch_util.h"

namespace mx::cuda {
namespace {

// Splits for a call (the grid): enough blocks to fill the GPU, no more than the longest key range
// needs. The longest range is bounded by the block table (no host sync to read the positions);
// each token uses only the splits its own range needs (the kernel decides, kAttnMinKeysPerSplit
// keys or more each). One split where the kernel has no merge counters for every (token, kv head)
// (then the call has far more than enough blocks anyway).
int attention_splits(const Backend& b, int64_t T, int Hkv, int64_t max_keys, bool fp8) {
  if (T * Hkv > kern::kAttnMergeCounters) return 1;
  const int64_t blocks =
      int64_t(fp8 ? heuristics::kAttentionBlocksPerSmFp8 : heuristics::kAttentionBlocksPerSm) * b.sm_count();
  const int64_t fill = (blocks + T * Hkv - 1) / (T * Hkv);
  const int64_t need = (max_keys + kern::kAttnMinKeysPerSplit - 1) / kern::kAttnMinKeysPerSplit;
  return int(std::clamp<int64_t>(std::min(fill, need), 1, kern::kAttnMaxSplits));
}

// bf16_qkv_rope_cache's contract, with the reason it fails (empty when the kernel can run).
std::string rope_cache_contract_violation(const ops::QkvRopeCacheArgs& a) {
  if (std::string bad = kv_cache_contract_violation(a.cache, a.batch); !bad.empty()) return bad;
  if (a.head_dim > 256) return fmt::format("head_dim {} > 256", a.head_dim);
  return {};
}

Status launch_bf16_qkv_rope_cache(Backend& b, const ops::QkvRopeCacheArgs& a) {
  const std::string bad = rope_cache_contract_violation(a);
  MX_CHECK(bad.empty(), "bf16_qkv_rope_cache: {}", bad);
  const kern::RopeCacheParams p{.qkv = a.qkv.data, .inv_freq = a.rope.inv_freq.ptr<const float>(),
                                .concentration = a.rope.concentration,
                                .positions = a.batch.positions.ptr<const int32_t>(),
                                .seq_index = a.batch.seq_index.ptr<const int32_t>(),
                                .block_tables = a.batch.block_tables.ptr<const int32_t>(),
                                .k_cache = a.cache.k.data, .v_cache = a.cache.v.data,
                                .kv_scales = kv_scales_of(a.cache), .T = a.qkv.dim(0),
                                .max_blocks = a.batch.block_tables.dim(1), .block_size = a.cache.k.dim(1),
                                .H = a.n_heads, .Hkv = a.n_kv_heads, .Dh = a.head_dim};
  return kernel_status("bf16_qkv_rope_cache", kern::run_bf16_qkv_rope_cache(p, b.stream()));
}

// bf16_kv_scales' contract, with the reason it fails (empty when the kernel can run).
std::string kv_scales_contract_violation(const ops::KvScalesArgs& a) {
  if (a.qkv.dtype != DType::BF16) return fmt::format("qkv must be bf16 (got {})", dtype_name(a.qkv.dtype));
  if (a.head_dim % 2 != 0) return fmt::format("head_dim {} is odd", a.head_dim);
  return {};
}

Status launch_bf16_kv_scales(Backend& b, const ops::KvScalesArgs& a) {
  const std::string bad = kv_scales_contract_violation(a);
  MX_CHECK(bad.empty(), "bf16_kv_scales: {}", bad);
  const kern::KvScalesParams p{.qkv = a.qkv.data, .scales = a.scales.ptr<float>(),
                               .concentration = a.concentration, .headroom = ops::kKvScaleHeadroom,
                               .fp8_max = ops::kFp8E4m3Max, .T = a.qkv.dim(0), .H = a.n_heads, .Hkv = a.n_kv_heads,
                               .Dh = a.head_dim};
  return kernel_status("bf16_kv_scales", kern::run_bf16_kv_scales(p, b.stream()));
}

// bf16_attention_decode's contract, with the reason it fails (empty when the kernel can run).
std::string attention_decode_contract_violation(const ops::AttentionArgs& a) {
  if (std::string bad = kv_cache_contract_violation(a.cache, a.batch); !bad.empty()) return bad;
  if (a.head_dim != kern::kAttnHeadDim) return fmt::format("head_dim {} != {}", a.head_dim, kern::kAttnHeadDim);
  if (a.n_heads / a.n_kv_heads > kern::kAttnMaxGroup)
    return fmt::format("{} q heads per kv head > {}", a.n_heads / a.n_kv_heads, kern::kAttnMaxGroup);
  if (!aligned16(a.qkv.data) || !aligned16(a.cache.k.data) || !aligned16(a.cache.v.data))
    return "qkv and the k and v caches must be 16-byte aligned";
  return {};
}

Status launch_bf16_attention_decode(Backend& b, const ops::AttentionArgs& a) {
  const std::string bad = attention_decode_contract_violation(a);
  MX_CHECK(bad.empty(), "bf16_attention_decode: {}", bad);
  const int64_t T = a.qkv.dim(0);
  if (T == 0) return ok_status();
  int64_t max_keys = a.batch.block_tables.dim(1) * a.cache.k.dim(1);
  if (a.window > 0) max_keys = std::min<int64_t>(max_keys, a.window);
  const int splits = attention_splits(b, T, a.n_kv_heads, max_keys, a.cache.fp8());
  void* ws;
  MX_ASSIGN(ws, b.workspace(size_t(T) * a.n_heads * splits * kern::kAttnPartialFloats * sizeof(float), "bf16_attention_decode"));
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
  return kernel_status("bf16_attention_decode", kern::run_bf16_attention_decode(p, b.stream()));
}

// The kernel kAuto runs: wgmma where this build's sm_90a code runs on the device.
bool use_wgmma(cuda::PrefillKernel k) {
  return k == cuda::PrefillKernel::kWgmma ||
         (k == cuda::PrefillKernel::kAuto && kern::attention_prefill_wgmma_available());
}
size_t prefill_smem_bytes(cuda::PrefillKernel k) {
  return use_wgmma(k) ? kern::attention_prefill_wgmma_smem_bytes() : kern::attention_prefill_smem_bytes();
}

const char* prefill_name(cuda::PrefillKernel k) {
  return use_wgmma(k) ? "sm90_bf16_attention_prefill" : "bf16_attention_prefill";
}

// The prefill kernels' contract (prefill_name(k)), with the reason it fails (empty when the kernel
// can run); dispatch asks first for kAuto (attention_prefill_supported).
std::string attention_prefill_contract_violation(const Backend& b, const ops::AttentionArgs& a, cuda::PrefillKernel k) {
  if (k == cuda::PrefillKernel::kWgmma && !kern::attention_prefill_wgmma_available())
    return "this build has no sm_90a code for this device";
  if (std::string bad = kv_cache_contract_violation(a.cache, a.batch); !bad.empty()) return bad;
  if (a.head_dim != kern::kAttnHeadDim) return fmt::format("head_dim {} != {}", a.head_dim, kern::kAttnHeadDim);
  if (a.n_heads / a.n_kv_heads > kern::kPrefillRows)
    return fmt::format("{} q heads per kv head > {}", a.n_heads / a.n_kv_heads, kern::kPrefillRows);
  if (a.qkv.dim(0) >= (int64_t(1) << 31)) return fmt::format("{} tokens >= 2^31", a.qkv.dim(0));
  if (!aligned16(a.qkv.data) || !aligned16(a.cache.k.data) || !aligned16(a.cache.v.data) || !aligned16(a.out.data))
    return "qkv, the k and v caches and out must be 16-byte aligned";
  if (a.cache.k.numel() / 8 >= (int64_t(1) << 31))
    return fmt::format("a cache layer {} of >= 2^31 chunks of 8 elements", a.cache.k.shape_str());
  if (prefill_smem_bytes(k) > b.max_smem_per_block())
    return fmt::format("needs {} bytes of shared memory per block, device has {}", prefill_smem_bytes(k),
                       b.max_smem_per_block());
  return {};
}

Status launch_bf16_attention_prefill(Backend& b, const ops::AttentionArgs& a, cuda::PrefillKernel kernel) {
  const char* name = prefill_name(kernel);
  const std::string bad = attention_prefill_contract_violation(b, a, kernel);
  MX_CHECK(bad.empty(), "{}: {}", name, bad);
  const int64_t T = a.qkv.dim(0);
  if (T == 0) return ok_status();
  // Tiles: at most one per tile_tokens tokens plus one per sequence change; with S sequences of
  // contiguous tokens that is <= T / tile_tokens + S. More (a sequence's tokens split apart) are
  // still served: each block loops over its share of the device-written tile list.
  const int64_t tile_tokens = kern::attention_prefill_tile_tokens(
      a.n_heads, a.n_kv_heads, use_wgmma(kernel) ? kern::kPrefillWgmmaRows : kern::kPrefillRows);
  const int64_t grid = std::min(T, (T + tile_tokens - 1) / tile_tokens + a.batch.seqs() - 1);
  void* ws;
  MX_ASSIGN(ws, b.workspace(size_t(T) * sizeof(int2) + 16, name));
  const kern::AttentionPrefillParams p{
      .qkv = a.qkv.data, .sinks = a.sinks.data, .sinks_f32 = a.sinks.dtype == DType::F32,
      .positions = a.batch.positions.ptr<const int32_t>(), .seq_index = a.batch.seq_index.ptr<const int32_t>(),
      .block_tables = a.batch.block_tables.ptr<const int32_t>(), .k_cache = a.cache.k.data,
      .v_cache = a.cache.v.data, .kv_scales = kv_scales_of(a.cache), .out = a.out.data,
      .tiles = static_cast<int2*>(ws),
      .num_tiles = reinterpret_cast<int32_t*>(static_cast<int2*>(ws) + T), .T = T,
      .max_blocks = a.batch.block_tables.dim(1), .block_size = a.cache.k.dim(1), .H = a.n_heads,
      .Hkv = a.n_kv_heads, .window = a.window, .grid_tiles = int(std::max<int64_t>(grid, 1)), .scale = a.scale};
  return kernel_status(name, use_wgmma(kernel) ? kern::run_sm90_bf16_attention_prefill(p, b.stream())
                                               : kern::run_bf16_attention_prefill(p, b.stream()));
}

}  // namespace

Status qkv_rope_cache(Backend& b, const ops::QkvRopeCacheArgs& a) { return launch_bf16_qkv_rope_cache(b, a); }
Status kv_scales(Backend& b, const ops::KvScalesArgs& a) { return launch_bf16_kv_scales(b, a); }
Status attention_decode(Backend& b, const ops::AttentionArgs& a) { return launch_bf16_attention_decode(b, a); }
Status attention_prefill(Backend& b, const ops::AttentionArgs& a, PrefillKernel kernel) {
  return launch_bf16_attention_prefill(b, a, kernel);
}
bool attention_prefill_supported(const Backend& b, const ops::AttentionArgs& a) {
  return attention_prefill_contract_violation(b, a, PrefillKernel::kAuto).empty();
}
// The decode kernel's partials at the T with the most splits x tokens (splits fall as T grows), and
// the prefill kernel's tile list.
size_t attention_scratch_bytes(const Backend& b, const ops::CallShapes& s) {
  if (s.heads == 0) return 0;
  int64_t most = 0;
  for (int64_t T = 1; T <= s.max_tokens; ++T) {
    const int splits = attention_splits(b, T, int(s.kv_heads), s.max_keys, s.fp8_kv);
    most = std::max(most, T * splits);
    if (splits == 1 && T * s.kv_heads > kern::kAttnMergeCounters) break;  // one split from here on: T is largest
  }
  most = std::max(most, s.max_tokens);
  const size_t decode = size_t(most) * size_t(s.heads) * kern::kAttnPartialFloats * sizeof(float);
  return std::max(decode, size_t(s.max_tokens) * sizeof(int2) + 16);
}

bool attention_prefill_wgmma_available() { return kern::attention_prefill_wgmma_available(); }
const char* attention_prefill_kernel_name() { return prefill_name(PrefillKernel::kAuto); }

}  // namespace mx::cuda
