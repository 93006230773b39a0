// Raw kernel launchers (one per kernel family, defined in the .cu file of the same stem): plain
// parameter structs, no checks. Called only by the launch_<stem> functions of launch_*.cpp, which
// check each contract first and turn the cudaError_t into a Status.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "kernels/heuristics.h"

namespace mx::cuda::kern {

// bf16_gather_rows.cu: out[i] = table[rows[i]] (embed and gather_rows); an id outside [0, n_rows)
// writes a zero row (the device cannot report it without a host sync).
struct GatherRowsParams {
  const void* table;   // (n_rows, width) bf16
  const int32_t* rows;  // (R)
  void* out;           // (R, width) bf16
  int64_t n_rows, width, R;
};
cudaError_t run_bf16_gather_rows(const GatherRowsParams& p, cudaStream_t s);

// mxfp4_rows_to_bf16.cu: out[i] = the BF16 values of MXFP4 row rows[i] (or first + i without rows)
// of a (n_rows, width) matrix stored as (n_rows, width/32) 16-byte blocks and E8M0 scales; a row
// outside [0, n_rows) gives zeros. width % 32 == 0, 16-byte aligned blocks and out.
struct Mxfp4RowsParams {
  const void* blocks;    // (n_rows, width/2) u8
  const void* scales;    // (n_rows, width/32) u8
  const int32_t* rows;   // (R), or null: rows first .. first + R - 1
  int64_t first;
  int64_t n_rows, width, R;
  void* out;             // (R, width) bf16
};
cudaError_t run_mxfp4_rows_to_bf16(const Mxfp4RowsParams& p, cudaStream_t s);

// bf16_bf16w_rmsnorm.cu
struct RmsNormParams {
  const void* x;       // (T, D) bf16
  const void* weight;  // (D) bf16 or f32
  bool weight_f32;
  void* out;           // (T, D) bf16, may alias x
  int64_t T, D;
  float eps;
  // Optional, the bias pre-pass of the GEMM this norm feeds (launch_dense.cpp): bias_out (T,
  // bias_n) = bias (bias_n) bf16 broadcast, written as bf16 or f32; in the same launch.
  const void* bias = nullptr;
  void* bias_out = nullptr;
  bool bias_out_f32 = false;
  int64_t bias_n = 0;
};
cudaError_t run_bf16_bf16w_rmsnorm(const RmsNormParams& p, cudaStream_t s);

// bf16_qkv_rope_cache.cu
struct RopeCacheParams {
  void* qkv;  // (T, (H + 2 Hkv) Dh) bf16, rotated in place
  const float* inv_freq;  // (Dh/2)
  float concentration;
  const int32_t* positions;     // (T)
  const int32_t* seq_index;     // (T)
  const int32_t* block_tables;  // (S, max_blocks)
  void* k_cache;                // (num_blocks, B, Hkv, Dh) bf16, or e4m3 with kv_scales
  void* v_cache;
  const float* kv_scales;       // (2) K, V scale of an FP8 cache (element = value / scale); null: bf16
  int64_t T, max_blocks, block_size;
  int H, Hkv, Dh;
};
cudaError_t run_bf16_qkv_rope_cache(const RopeCacheParams& p, cudaStream_t s);

// bf16_kv_scales.cu: the FP8 cache scales of one layer from a call's unrotated qkv (ops::kv_scales).
struct KvScalesParams {
  const void* qkv;  // (T, (H + 2 Hkv) Dh) bf16
  float* scales;    // (2) out
  float concentration, headroom, fp8_max;  // ops::kKvScaleHeadroom, ops::kFp8E4m3Max
  int64_t T;
  int H, Hkv, Dh;
};
cudaError_t run_bf16_kv_scales(const KvScalesParams& p, cudaStream_t s);

// bf16_bf16w_gemv.cu: out (T, N) (=|+=) x' (T, Kin) . W (N, Kin)^T + bias, T <= kGemvMaxTokens;
// x' = x, or rmsnorm(x) rounded to bf16 when norm_weight is set (x staged in shared memory); with
// rope_cache, out is the qkv row and the epilogue does bf16_qkv_rope_cache's work (rope.qkv and
// rope.T unused).
inline constexpr int kGemvMaxTokens = 4;
inline constexpr size_t kGemvMaxSmem = 48 * 1024;  // gemv_smem_bytes limit (no opt-in)
struct GemvParams {
  const void* x;     // (T, Kin) bf16
  const void* w;     // (N, Kin) bf16
  const void* bias;  // (N) bf16 or null
  void* out;         // (T, N) bf16 or f32; must not alias x when norm_weight is set
  bool out_f32, accumulate;
  int64_t T, N, Kin;
  const void* norm_weight = nullptr;  // (Kin) bf16, or null: no input norm
  float norm_eps = 1e-5f;
  bool rope_cache = false;
  RopeCacheParams rope{};
  const void* w_scales = nullptr;  // MXFP4 w (bf16_mxfp4w_gemv): (N, Kin/32) u8 E8M0, w = (N, Kin/2) u8
};
size_t gemv_smem_bytes(int64_t T, int64_t Kin, bool norm);  // dynamic shared memory of a launch
cudaError_t run_bf16_bf16w_gemv(const GemvParams& p, cudaStream_t s);
// bf16_mxfp4w_gemv.cu: the same op with MXFP4 weights (Kin % 32 == 0), FP32 FMAs, T <= kGemvMaxTokens.
cudaError_t run_bf16_mxfp4w_gemv(const GemvParams& p, cudaStream_t s);
// bf16_mxfp4w_gemv_mma.cu: the same on the tensor cores, T <= kMxfp4MmaMaxTokens (with rope_cache
// Dh % 16 == 0); its shared memory (x' staging, weight ring) may exceed 48 KB (opt-in).
inline constexpr int kMxfp4MmaMaxTokens = 8;
inline constexpr size_t kMxfp4GemvMaxSmem = 90 * 1024;  // + ~4.3 KB static: within 99 KB (sm_86/89/120)
size_t mxfp4_gemv_mma_smem_bytes(int64_t T, int64_t Kin, bool norm);
cudaError_t run_bf16_mxfp4w_gemv_mma(const GemvParams& p, cudaStream_t s);

// bf16_bf16w_gemm.cu: out (T, N) (+)= bias (N) broadcast, the pre-pass of the cuBLASLt path.
cudaError_t run_bias_broadcast(void* out, bool out_f32, const void* bias, bool accumulate, int64_t T, int64_t N,
                               cudaStream_t s);

// bf16_attention_decode.cu: split-K attention over the paged cache (any T; Dh == 64, H/Hkv <= 8).
inline constexpr int kAttnHeadDim = 64;
inline constexpr int kAttnMaxGroup = 8;
inline constexpr int kAttnMaxSplits = 64;          // key-range splits per (token, kv head)
inline constexpr int kAttnMergeCounters = 4096;    // (token, kv head) pairs merged by their split blocks
inline constexpr int kAttnMinKeysPerSplit = 128;   // keys per split block at least (256 measured the same)
inline constexpr int kAttnPartialFloats = kAttnHeadDim + 4;  // a split's m, l, 2 unused, o[Dh]: 16-byte rows
// Kept at 128 bytes, sinks_f32 in the tail padding: at 136 (kv_scales added with sinks_f32 after
// sinks) the BF16 decode kernel compiled to slower code, 120b batch 1 -0.5% (PERFORMANCE.md run 30).
struct AttentionParams {
  const void* qkv;  // (T, (H + 2 Hkv) Dh) bf16
  const void* sinks;  // (H) bf16 or f32
  const int32_t* positions;
  const int32_t* seq_index;
  const int32_t* block_tables;
  const void* k_cache;  // (num_blocks, B, Hkv, Dh) bf16, or e4m3 with kv_scales
  const void* v_cache;
  const float* kv_scales;  // (2) K, V scale of an FP8 cache; null: bf16
  void* out;        // (T, H Dh) bf16
  float* partials;  // (T, H, splits, kAttnPartialFloats) f32 scratch (splits > 1)
  int64_t T, max_blocks, block_size;
  int H, Hkv, window, splits;
  float scale;
  bool sinks_f32;
};
static_assert(sizeof(AttentionParams) == 128, "see above");
cudaError_t run_bf16_attention_decode(const AttentionParams& p, cudaStream_t s);

// bf16_attention_prefill.cu: tiled (FlashAttention-2-style) attention for many tokens per call,
// Dh == 64, 1 <= H/Hkv <= kPrefillRows. A query tile is up to rows / (H/Hkv) consecutive tokens of
// one sequence (rows: the kernel's block), all their q heads of one kv head (one row per (token, head)).
inline constexpr int kPrefillRows = 128;       // rows per block of the mma.sync kernel
inline constexpr int kPrefillWgmmaRows = 128;  // ... of the wgmma kernel (2 warpgroups of 64)
struct AttentionPrefillParams {
  const void* qkv;    // (T, (H + 2 Hkv) Dh) bf16
  const void* sinks;  // (H) bf16 or f32
  bool sinks_f32;
  const int32_t* positions;     // (T)
  const int32_t* seq_index;     // (T)
  const int32_t* block_tables;  // (S, max_blocks)
  const void* k_cache;          // (num_blocks, B, Hkv, Dh) bf16, or e4m3 with kv_scales
  const void* v_cache;
  const float* kv_scales;       // (2) K, V scale of an FP8 cache; null: bf16
  void* out;           // (T, H Dh) bf16
  int2* tiles;         // (T) scratch: {first token, tokens} of each query tile
  int32_t* num_tiles;  // (1) scratch
  int64_t T, max_blocks, block_size;
  int H, Hkv, window, grid_tiles;  // grid_tiles: blocks along the tiles (each loops over its share)
  float scale;
};
int attention_prefill_tile_tokens(int H, int Hkv, int rows);  // tokens per query tile: rows / (H/Hkv)
size_t attention_prefill_smem_bytes();              // dynamic shared memory (opt-in above 48 KB)
// The tile list for blocks of `rows` (token, q head) rows.
cudaError_t run_attention_prefill_tiles(const AttentionPrefillParams& p, int rows, cudaStream_t s);
cudaError_t run_bf16_attention_prefill(const AttentionPrefillParams& p, cudaStream_t s);  // tiles + mma.sync kernel
// sm90_bf16_attention_prefill.cu: the same on wgmma (sm_90a). Available when this build holds
// sm_90a code (MXSERVE_SM90A) and the device runs it.
bool attention_prefill_wgmma_available();
size_t attention_prefill_wgmma_smem_bytes();
cudaError_t run_sm90_bf16_attention_prefill(const AttentionPrefillParams& p, cudaStream_t s);

// bf16_router_topk.cu: one warp per token, E <= kTopkMaxExperts, K <= kTopkMaxK.
inline constexpr int kTopkMaxExperts = 256;
inline constexpr int kTopkMaxK = 8;
struct RouterTopkParams {
  const void* logits;  // (T, E) bf16 or f32
  bool logits_f32;
  int32_t* ids;    // (T, K)
  float* weights;  // (T, K)
  int64_t T;
  int E, K;
};
cudaError_t run_bf16_router_topk(const RouterTopkParams& p, cudaStream_t s);

// bf16_bf16w_norm_router.cu: the MoE block's entry in one kernel for T <= kRouterFusedMaxTokens:
// xn = rmsnorm(x) (bf16), logits = xn . W^T + bias (stored in their dtype).
inline constexpr int kRouterFusedMaxTokens = 8;
inline constexpr int kRouterFusedMaxD = 4096;  // 2 16-byte chunks per thread of 256
struct NormRouterParams {
  const void* x;            // (T, D) bf16
  const void* norm_weight;  // (D) bf16
  float eps;
  const void* w;     // (E, D) bf16
  const void* bias;  // (E) bf16 or null
  void* xn;          // (T, D) bf16 out, not aliasing x
  void* logits;      // (T, E) bf16 or f32 out
  bool logits_f32;
  int64_t T;
  int D, E;
  const void* w_scales = nullptr;  // MXFP4 router: (E, D/32) u8, w = (E, D/2) u8 (D % 32 == 0)
};
cudaError_t run_bf16_bf16w_norm_router(const NormRouterParams& p, cudaStream_t s);

// bf16_mxfp4w_moe_gemv.cu: the MXFP4 expert GEMVs straight from the top-k ids.
inline constexpr int kMoeMaxK = 8;
struct MoeParams {
  const void* x;            // (T, D) bf16
  int32_t* ids;             // (T, K): read, or written by the down kernel when logits is set
  float* weights;           // (T, K): likewise
  const void* logits;       // (T, E) bf16 or f32, or null: when set every block selects its token's
  bool logits_f32;          //   top-K itself (topk.cuh, the same as bf16_router_topk)
  const uint8_t* gu_blocks;  // (E, 2F, D/32, 16)
  const uint8_t* gu_scales;  // (E, 2F, D/32)
  const void* gu_bias;       // (E, 2F) bf16
  const uint8_t* dn_blocks;  // (E, D, F/32, 16)
  const uint8_t* dn_scales;  // (E, D, F/32)
  const void* dn_bias;       // (E, D) bf16
  void* act;                 // (T, K, F) f16 scratch: SwiGLU output * act_scale, in staged order
  void* residual;            // (T, D) bf16, += in place
  int64_t T;
  int D, F, E, K;
  float limit, alpha;
  float act_scale;  // power of two keeping |act| below 2^15: moe_gemv_act_scale(limit, alpha)
  int sms;          // multiprocessors of the device (sizes the work per warp)
};
cudaError_t run_bf16_mxfp4w_moe_gemv(const MoeParams& p, cudaStream_t s);
size_t moe_gemv_smem_bytes(int D, int F, int K);  // dynamic shared memory of the larger kernel
float moe_gemv_act_scale(float limit, float alpha);  // needs limit >= 0 finite, alpha > 0

}  // namespace mx::cuda::kern

// ---- bf16_mxfp4w_moe_grouped.cu: the many-token MoE (prefill) ---------------------------------
// route (device counting sort of the T·K (token, slot) pairs by expert, tile list) -> gate_up
// grouped GEMM (MXFP4 decoded to BF16, mma.sync, bias + clamped SwiGLU epilogue) -> down grouped
// GEMM (+ bias) -> finalize (per token, the K weighted rows in slot order into the residual).
namespace mx::cuda::kern {

// (token, slot) rows per GEMM tile, all of one expert: the heights of heuristics.h, chosen per call
// by heuristics::plan_moe_grouped.
inline constexpr int kGroupedTileM = heuristics::kGroupedTileM;
inline constexpr int kGroupedTallTileM = heuristics::kGroupedTallTileM;
inline constexpr int kGroupedShortTileM = heuristics::kGroupedShortTileM;  // bf16_mxfp4w_moe_thin.cu
inline constexpr int kGroupedMaxExperts = 1024;
struct MoeGroupedParams {
  const void* x;             // (T, D) bf16
  const int32_t* ids;        // (T, K)
  const float* weights;      // (T, K)
  const uint8_t* gu_blocks;  // (E, 2F, D/32, 16)
  const uint8_t* gu_scales;  // (E, 2F, D/32)
  const void* gu_bias;       // (E, 2F) bf16
  const uint8_t* dn_blocks;  // (E, D, F/32, 16)
  const uint8_t* dn_scales;  // (E, D, F/32)
  const void* dn_bias;       // (E, D) bf16
  // scratch (launcher-carved workspace), P = T·K
  int32_t* pair_at;      // (P) pair t·K+k at each expert-sorted position
  int32_t* pos_of_pair;  // (P) sorted position of each pair, -1 for an id outside [0, E)
  int4* tiles;           // (max_tiles) {expert, first position, rows, 0}
  int32_t* num_tiles;    // (1)
  void* act;             // (P, F) bf16: SwiGLU output, sorted order
  float* y;              // (P, D) f32: expert output incl. bias, sorted order
  void* residual;        // (T, D) bf16, += in place
  // FP8 activations (e4m3_mxfp4w_moe_grouped.cu) when fp8; null otherwise. Sorted order.
  uint8_t* xq;          // (P, D) e4m3: x of each pair, quantized by the expand kernel
  uint8_t* xs;          // (P, D/32) e8m0
  uint8_t* actq;        // (P, F) e4m3: SwiGLU output, quantized in the gate_up epilogue
  uint8_t* act_scales;  // (P, F/32) e8m0
  // The wgmma GEMMs (sm90_bf16_mxfp4w_moe_grouped.cu); act is then in their permuted k order.
  void* xp;  // (T, D) bf16: x with every 64-wide stage permuted; null for the other families
  int64_t T;
  int D, F, E, K, max_tiles;
  int tile_m;  // rows per tile: kGroupedShortTileM for kThin, else kGroupedTileM or kGroupedTallTileM
  float limit, alpha;
  heuristics::MoeGroupedGemm gemm;  // the GEMM family (heuristics::plan_moe_grouped)
};
int moe_grouped_max_tiles(int64_t T, int K, int E, int tile_m);  // bound on the tile count
size_t moe_grouped_smem_bytes(int tile_m, int D, int F);  // dynamic shared memory of the BF16 GEMM kernels
size_t moe_grouped_e4m3_smem_bytes();                // and of the FP8 ones
// route -> BF16 gather-GEMMs, or (fp8) expand+quantize -> FP8 GEMMs -> finalize.
cudaError_t run_bf16_mxfp4w_moe_grouped(const MoeGroupedParams& p, cudaStream_t s);
cudaError_t run_e4m3_mxfp4w_moe_grouped_gemms(const MoeGroupedParams& p, cudaStream_t s);  // sm_89+
// The GEMMs of the 16-pair tiles (decode batches): bf16_mxfp4w_moe_thin.cu.
size_t moe_thin_smem_bytes(int D, int F);
cudaError_t run_bf16_mxfp4w_moe_thin_gemms(const MoeGroupedParams& p, cudaStream_t s);
// The BF16 GEMMs on wgmma (needs p.xp): this build holds sm_90a code for the device.
bool moe_grouped_wgmma_available();
size_t moe_grouped_wgmma_smem_bytes(int tile_m, int D, int F);
cudaError_t run_sm90_bf16_mxfp4w_moe_grouped_gemms(const MoeGroupedParams& p, cudaStream_t s);

}  // namespace mx::cuda::kern
