// heuristics: every kernel-configuration choice of the backends in one place, each named for what
// it bounds and saying how it was measured: the token bounds that route ops between kernels
// (dispatch.cpp), the grouped MoE GEMM family and tile height of a call (launch_moe_grouped.cpp),
// the decode attention's blocks per SM (launch_attention.cpp) and the decode graph buckets
// (runtime/step_runner.cpp). ops::dispatch_lines() prints them at start-up.
#pragma once

#include <cstdint>
#include <vector>

namespace mx::heuristics {

// ---- op routing (dispatch.cpp) -------------------------------------------------------------------
// Tokens up to which linear runs the GEMV kernel (weights streamed once for all tokens) instead of
// cuBLASLt. Measured with bench_kernels on H100 at qkv 5120x2880 (docs/lab): GEMV
// 13.4 us at T=1 and T=2 but 18.5 us at T=4, cuBLASLt 13.0 us at T=5..8; so GEMV up to 2.
// With an input norm (LinearArgs::norm) the GEMV normalises x itself, so up to this T the rmsnorm
// kernel is not launched; above it, the rmsnorm kernel writes a normalised copy for cuBLASLt. The
// same bound selects the fused qkv_projection (norm + GEMV + RoPE + cache write in one kernel).
// Raised to 4 (the kernel's limit) for speculative rounds of 3 drafts: the fused kernel at T = 4
// replaces rmsnorm -> cuBLASLt -> bias -> qkv_rope_cache (docs/lab, "Speculative decoding").
inline constexpr int64_t kLinearGemvMaxTokens = 4;
// The same bound for MXFP4 weights (--mxfp4-layers): the limit of bf16_mxfp4w_gemv_mma (T >= 2;
// bf16_mxfp4w_gemv at T = 1). Above it the weights are decoded to BF16 chunks for cuBLASLt, which
// writes and reads ~4x the MXFP4 bytes again: the GEMVs keep every T they can.
inline constexpr int64_t kLinearMxfp4GemvMaxTokens = 8;
// Tokens up to which moe_router's norm + GEMV run as one kernel (bf16_bf16w_norm_router: every
// block normalises all T tokens and reads its router row once) instead of rmsnorm -> linear. The
// kernel's limit (8); measured on the H100 at 120b/20b sizes with `bench_sweeps moe_router`
// (run 31: fused 6.8 vs 8.4 us at T = 8, E = 128; a version with
// 8-token chunks and 4 rows a block took 22 us at T = 64 against 8.9, latency-bound per block).
inline constexpr int64_t kMoeRouterFusedMaxTokens = 8;
// Tokens up to which the MoE runs the per-(token, slot) GEMVs (bf16_mxfp4w_moe_gemv, selecting the
// experts from the router logits themselves); above it the (token, slot) pairs are sorted by expert
// and grouped GEMMs run (each expert's weights read once per tile of pairs). Measured on
// the H100 at 120b sizes (E=128, K=4, D=F=2880) with `bench_sweeps moe_grouped`
// (docs/lab, "MoE prefill: weights decoded into
// the mma fragments"), route + both kernels per call: GEMVs 999 us at T=64, 1224 at T=80, 1906 at
// T=128; grouped 1015, 1071 and 1169 us: they cross between T=64 and T=80.
// With 16-pair tiles for decode batches (run 17, same sweep, µs per 120b layer): GEMVs 548 at T=32,
// 993 at 64; grouped 649 and 847: they cross near T=48. With the thin kernels of those tiles
// (bf16_mxfp4w_moe_thin.cu, run 21): GEMVs 292 / 426 / 546 at T = 16 / 24 / 32, grouped 327 / 423 /
// 518: they tie at T = 24; the GEMVs keep T <= 24.
inline constexpr int64_t kMoeGemvMaxTokens = 24;
// Tokens per sequence of the call (T / block-table rows) from which attention runs the tiled
// prefill kernel (one block per query tile of 16 tokens x 8 q heads of one sequence, each K/V tile
// shared by all of them, tensor cores) instead of the split-K decode kernel (each token re-reads
// its keys; splits the key range when T is small). A decode batch (one token per sequence) stays
// on the decode kernel. Measured with bench_kernels on the H100 (docs/lab, "Attention
// prefill"), one sequence on a 4096-token prefix: decode 132 us at T=32 and 257 us at T=64, prefill
// ~182 us for any T <= 64 (8 blocks); window 128: decode 11.3 / 18.3 us, prefill 16.4 / 16.5 us.
// They cross near T=48.
inline constexpr int64_t kAttentionPrefillMinTokensPerSeq = 48;

// ---- grouped MoE GEMMs (launch_moe_grouped.cpp) --------------------------------------------------
// (token, slot) rows per GEMM tile, all of one expert.
inline constexpr int kGroupedShortTileM = 16;  // decode batches: few pairs per expert
inline constexpr int kGroupedTileM = 64;
inline constexpr int kGroupedTallTileM = 128;
// BF16 GEMM tiles of 128 pairs (each weight decoded once per 128 pairs, twice the A reads per mma)
// from this many pairs per expert on average, else 64. H100, one 120b layer (grouped path total):
// 128-pair tiles won at T = 2048 (64 pairs per expert) and lost at T = 512 (16 per expert)
// (docs/lab/KERNEL_NOTES.md, "MoE prefill: weights decoded into the mma fragments").
inline constexpr int64_t kTallTileMinPairsPerExpert = 64;
// The wgmma GEMMs from this many pairs per expert on average, mma.sync below. H100, one 120b layer
// (E = 128), route + GEMMs + finalize: wgmma won at T = 2048 (64 pairs per expert) and lost at T =
// 512 (16 per expert) (docs/lab/RUNS_01-10.md, run 10).
inline constexpr int64_t kWgmmaMinPairsPerExpert = 64;
// 16-pair tiles (the thin GEMMs) up to this many pairs per expert on average (decode batches: the
// 64-row tiles spend their mma work on empty rows). Set from the sweep
// `bench_sweeps moe_grouped` (docs/lab/RUNS_11-20.md, run 17).
inline constexpr int64_t kShortTileMaxPairsPerExpert = 16;

// The GEMM family of a grouped call.
enum class MoeGroupedGemm {
  kThin,     // 16-pair tiles: bf16_mxfp4w_moe_thin
  kMmaSync,  // 64- or 128-pair tiles: bf16_mxfp4w_moe_grouped (mma.sync)
  kWgmma,    // 64- or 128-pair tiles: sm90_bf16_mxfp4w_moe_grouped (sm_90a)
  kFp8,      // 64-pair tiles, FP8 activations: e4m3_mxfp4w_moe_grouped
};
// A BF16 family pinned by a test or bench (kAuto: the choice below).
enum class MoeGroupedPin { kAuto, kMmaSync, kWgmma };
struct MoeGroupedCall {
  int64_t pairs;    // T·K
  int64_t experts;  // E
  bool fp8;              // FP8 activations (--moe-activation fp8)
  bool offsets32;        // activation offsets fit 32 bits (the thin and wgmma kernels need it)
  bool wgmma_available;  // this build's sm_90a code runs on the device
  MoeGroupedPin pin = MoeGroupedPin::kAuto;
};
struct MoeGroupedPlan {
  MoeGroupedGemm gemm;
  int tile_m;  // kGroupedShortTileM (kThin), kGroupedTileM or kGroupedTallTileM
};
MoeGroupedPlan plan_moe_grouped(const MoeGroupedCall& c);
const char* moe_grouped_gemm_name(MoeGroupedGemm g);  // the kernel family's name

// ---- decode attention (launch_attention.cpp) -----------------------------------------------------
// Aim: T * Hkv * splits ~ this many blocks per SM. bench_kernels on the H100, depth 32768, one
// token: 2 was the fastest of 1..4 (docs/lab/KERNEL_NOTES.md, "Decode attention on the tensor
// cores"); 8 and 16 for batches measured slower (run 30).
inline constexpr int kAttentionBlocksPerSm = 2;
// The same with an FP8 cache, whose tiles cost more instructions per byte (the widening): at depth
// 32768 4 beat 2 and 3, and more change nothing at the 64-split cap (docs/lab/RUNS_21-30.md,
// run 23).
inline constexpr int kAttentionBlocksPerSmFp8 = 4;

// ---- decode graphs (runtime/step_runner.cpp) -----------------------------------------------------
// Decode bucket sizes up to max_rows: every size up to 8 (a padded token reads its own 4 experts:
// small batches stay exact), then steps of 4 to 16, 8 to 64, 16 to 128, 32 to 256, 64 beyond.
std::vector<int> decode_buckets(int max_rows);

}  // namespace mx::heuristics
