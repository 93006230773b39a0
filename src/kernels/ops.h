// The op interface: one function per op, each taking the engine's Context (kernels/context.h: the
// stream, scratch and settings of its device) and an args struct of tensor views. The backend
// is chosen by where the tensors live (Device::CPU -> kernels/cpu, Device::CUDA -> kernels/cuda);
// every shape/dtype/arch decision is made in dispatch.cpp. The forward pass (model/forward.cpp)
// is written once over these ops.
//
// Dimension letters: T tokens in the call, S sequences, D hidden, H q heads, Hkv kv heads,
// Dh head dim, E experts, K experts per token, F expert width, V vocab, B kv block size.
// Activations ("act") are F32 on the CPU backend and BF16 on the CUDA backend.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "kernels/context.h"

namespace mx::ops {

// ---- memory -------------------------------------------------------------------------------
// Owning allocation on a device (64-byte aligned host memory, or cudaMalloc).
class Buffer {
 public:
  Buffer() = default;
  static Result<Buffer> allocate(Device device, size_t bytes);
  // Page-locked host memory (cudaMallocHost in CUDA builds with a device, else plain host memory):
  // the source or target of copy_async without a staging copy by the driver.
  static Result<Buffer> allocate_pinned(size_t bytes);
  Buffer(Buffer&&) noexcept;
  Buffer& operator=(Buffer&&) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer();

  void* data() const { return data_; }
  size_t size() const { return size_; }
  Device device() const { return device_; }
  // A view of the whole buffer (or its first bytes) with the given dtype and shape.
  Tensor view(DType dtype, std::initializer_list<int64_t> shape) const;

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
  Device device_ = Device::CPU;
  bool pinned_ = false;
};

// Byte copy between tensors of equal byte size, any direction.
Status copy(const Tensor& dst, const Tensor& src);
// `height` rows of `width` bytes from src (rows `spitch` bytes apart) to dst (rows `dpitch` apart),
// any direction (one cudaMemcpy2D); dst_device / src_device say where each pointer lives.
Status copy_2d(void* dst, size_t dpitch, Device dst_device, const void* src, size_t spitch, Device src_device,
               size_t width, size_t height);
// The same, queued on the context's stream after the work before it (host memory must be pinned
// and stay untouched until an Event recorded after the copy completes); immediate on the CPU.
Status copy_async(Context& cx, const Tensor& dst, const Tensor& src);
// src (T, w) into columns col0 .. col0 + w of dst (T, W), same dtype, queued like copy_async (device
// memory on both sides on CUDA): the target's residual stream into a draft's feature rows.
Status copy_columns_async(Context& cx, const Tensor& dst, int64_t col0, const Tensor& src);

// A point in a context's stream: record() after queued work, wait() blocks the host until that
// work is done. On the CPU every op is done when it returns: both are no-ops.
class Event {
 public:
  static Result<Event> create(Device device);
  Status record(Context& cx);
  Status wait();
  Event() = default;
  Event(Event&&) noexcept;
  Event& operator=(Event&&) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  ~Event();

 private:
  Device device_ = Device::CPU;
  void* event_ = nullptr;
};
bool cuda_available();  // built with CUDA and a device is present

// The activations' dtype on a backend (and an auto KV cache's): f32 on the CPU reference, bf16 on CUDA.
inline DType act_dtype(Device d) { return d == Device::CPU ? DType::F32 : DType::BF16; }
Status synchronize(Context& cx);  // waits for the work queued on the context's stream
struct MemoryInfo {
  size_t free_bytes = 0, total_bytes = 0;
};
Result<MemoryInfo> memory_info(Device device);
// The current GPU's compute capability as 10 x major + minor (90 on an H100); 0 on the CPU.
int compute_capability(Device device);

// A captured sequence of ops replayed as one unit on a context's stream: a CUDA graph on the CUDA
// backend (no host work or synchronisation inside), the recorded function itself on the CPU. The
// context must outlive the graph; its scratch can no longer grow once one is captured.
class StepGraph {
 public:
  static Result<StepGraph> capture(Context& cx, std::function<Status()> step);
  Status replay();
  StepGraph() = default;
  StepGraph(StepGraph&&) noexcept;
  StepGraph& operator=(StepGraph&&) noexcept;
  ~StepGraph();

 private:
  Context* cx_ = nullptr;
  std::function<Status()> step_;
  void* graph_exec_ = nullptr;
};

// ---- model ops ----------------------------------------------------------------------------
// A dense weight (N, Kin) is BF16, or with --mxfp4-layers MXFP4: `w` then holds (N, Kin/2) u8 —
// row n's blocks of 32 inputs, 16 bytes each, element 2j in the low nibble of byte j (the experts'
// layout, GPTOSS_SPEC §3) — and its scales tensor (N, Kin/32) u8 E8M0 is set. Kin % 32 == 0.
// core/dtype.h quantize_mxfp4_block makes them.
inline bool is_mxfp4(const Tensor& scales) { return !scales.empty(); }

struct EmbedArgs {
  Tensor ids;           // (T) i32
  Tensor table;         // (V, D) bf16, or (V, D/2) u8 MXFP4 with table_scales
  Tensor out;           // (T, D) act
  Tensor table_scales;  // (V, D/32) u8, MXFP4 only
};
Status embed(Context& cx, const EmbedArgs& a);

struct RmsNormArgs {
  Tensor x;       // (T, D) act
  Tensor weight;  // (D) bf16
  float eps = 1e-5f;
  Tensor out;  // (T, D) act; may alias x
};
Status rmsnorm(Context& cx, const RmsNormArgs& a);

// An RMSNorm applied to a linear's input inside the op (no normalised copy of x is written).
struct InputNorm {
  Tensor weight;  // (Kin) bf16 or f32; empty: x is used as it is
  float eps = 1e-5f;
};

// out = x' · W^T + bias (+ out), x' = x, or with `norm` x' = rmsnorm(x) with the values ops::rmsnorm
// would write to an act buffer (BF16-rounded on CUDA): rmsnorm + linear as one op, fused into the
// GEMV kernel for decode (dispatch.cpp). With Accumulate::IntoOut, out += x'·W^T + bias (residual).
enum class Accumulate { No, IntoOut };
struct LinearArgs {
  Tensor x;     // (T, Kin) act
  Tensor w;     // (N, Kin) bf16, or (N, Kin/2) u8 MXFP4 with w_scales
  Tensor bias;  // (N) bf16, optional (empty)
  Tensor out;   // (T, N) act, or f32 for logits
  Accumulate accumulate = Accumulate::No;
  InputNorm norm;  // optional
  Tensor w_scales;  // (N, Kin/32) u8, MXFP4 w only
};
Status linear(Context& cx, const LinearArgs& a);

// YaRN RoPE table, computed once on the host (model/rope.cpp) and uploaded where needed.
struct RopeTable {
  Tensor inv_freq;  // (Dh/2) f32
  float concentration = 1.0f;  // multiplies cos and sin
};

// Describes where each of the T tokens of a call lives in the paged KV cache.
struct TokenBatch {
  Tensor positions;     // (T) i32 position of each token in its sequence
  Tensor seq_index;     // (T) i32 row of block_tables for each token
  Tensor block_tables;  // (S, max_blocks) i32 physical block ids
  int64_t num_seqs = 0;  // sequences the T tokens belong to; 0: S (the engine's tables have a row
                         // per seat, most of them idle in a given call)
  int64_t seqs() const { return num_seqs > 0 ? num_seqs : block_tables.dim(0); }
};

// One layer of the paged cache: act, or FP8 E4M3 (--kv-cache-dtype fp8), where an element holds
// value / scale (round to nearest even, saturating at ±448) with one scale per layer for K and one
// for V, read by the kernels from `scales` (device data: a calibrating call may set them).
struct KvLayer {
  Tensor k;       // (num_blocks, B, Hkv, Dh) act or f8_e4m3
  Tensor v;       // (num_blocks, B, Hkv, Dh) act or f8_e4m3
  Tensor scales;  // (2) f32 on the cache's device: K scale, V scale; FP8 only (empty for act)
  bool fp8() const { return k.dtype == DType::F8_E4M3; }
};

// The per-layer FP8 scales of a cache from one call's qkv, before its RoPE (--kv-cache-dtype fp8
// without --kv-scale: the first prefill's): K scale = kKvScaleHeadroom · concentration · the largest
// norm of a k head's rotation pair (x_i, x_{i+Dh/2}) / 448 (a rotation keeps each element within
// that norm, at every position), V scale = kKvScaleHeadroom · max |v| / 448; a zero maximum gives
// 1. The headroom leaves one binade for later tokens larger than the first prefill's.
constexpr float kKvScaleHeadroom = 2.0f;
constexpr float kFp8E4m3Max = 448.0f;
// Scales a cache accepts (--kv-scale): 1 / scale stays a finite float (a zero would else become
// 0 · inf = NaN), and a K scale of at most 100 (values up to 44,800) keeps the decode kernel's Q,
// prescaled by the K scale into FP16, far from overflow.
constexpr float kMinKvScale = 1e-20f, kMaxKvScale = 100.0f;
struct KvScalesArgs {
  Tensor qkv;  // (T, (H + 2·Hkv)·Dh) act, not yet rotated
  int n_heads = 0, n_kv_heads = 0, head_dim = 0;
  float concentration = 1.0f;  // the RoPE table's
  Tensor scales;               // (2) f32 out
};
Status kv_scales(Context& cx, const KvScalesArgs& a);

// Rotates q and k inside qkv (RoPE, half-split) and writes k, v of every token to the cache.
struct QkvRopeCacheArgs {
  Tensor qkv;  // (T, (H + 2·Hkv)·Dh) act: q heads, then k heads, then v heads; rotated in place
  int n_heads = 0, n_kv_heads = 0, head_dim = 0;
  RopeTable rope;
  TokenBatch batch;
  KvLayer cache;
};
Status qkv_rope_cache(Context& cx, const QkvRopeCacheArgs& a);

// The attention block's input as one op: qkv = linear(x, w, bias, norm), then qkv_rope_cache on
// it, with the same results as those two ops; on CUDA for decode one GEMV kernel whose epilogue
// rotates q and k and writes k and v to the cache (dispatch.cpp).
struct QkvProjectionArgs {
  Tensor x;        // (T, D) act: the residual stream (with `norm`) or a normalised input
  InputNorm norm;  // optional: the attention RMSNorm
  Tensor w;        // ((H + 2·Hkv)·Dh, D) bf16, or MXFP4 with w_scales (as LinearArgs)
  Tensor w_scales;
  Tensor bias;     // ((H + 2·Hkv)·Dh) bf16, optional (empty)
  Tensor qkv;      // (T, (H + 2·Hkv)·Dh) act out: q and k heads rotated, v heads
  int n_heads = 0, n_kv_heads = 0, head_dim = 0;
  RopeTable rope;
  TokenBatch batch;
  KvLayer cache;
  bool calibrate_kv = false;  // FP8 cache: set cache.scales from this call (kv_scales) before writing
};
Status qkv_projection(Context& cx, const QkvProjectionArgs& a);

// Attention of every token's q heads over its sequence's cached keys 0..pos (or the last
// `window` of them), with one learned sink logit per q head; q head h uses kv head h / (H/Hkv).
struct AttentionArgs {
  Tensor qkv;    // (T, (H + 2·Hkv)·Dh) act, q already rotated
  Tensor sinks;  // (H) bf16
  int n_heads = 0, n_kv_heads = 0, head_dim = 0;
  int window = 0;  // 0: full causal; else keys j with pos - window < j <= pos
  float scale = 0.125f;
  TokenBatch batch;
  KvLayer cache;
  Tensor out;  // (T, H·Dh) act
};
Status attention(Context& cx, const AttentionArgs& a);

// Top-k of router logits, then softmax over those k (descending order, lower index wins ties).
struct RouterTopkArgs {
  Tensor logits;   // (T, E) act or f32
  Tensor ids;      // (T, K) i32
  Tensor weights;  // (T, K) f32
};
Status router_topk(Context& cx, const RouterTopkArgs& a);

// The MoE block's entry as one op: xn = rmsnorm(x), logits = xn · W^T + bias, then ids, weights =
// router_topk(logits) (over the logits as stored in their dtype). The same results as those three
// ops in a row; one kernel on CUDA for decode (dispatch.cpp), which also writes xn for ops::moe.
// Without ids and weights the op stops at the logits: ops::moe then selects from them.
struct MoeRouterArgs {
  Tensor x;            // (T, D) act: residual stream
  Tensor norm_weight;  // (D) bf16 or f32
  float eps = 1e-5f;
  Tensor w;            // (E, D) bf16 router, or MXFP4 with w_scales (as LinearArgs)
  Tensor w_scales;
  Tensor bias;         // (E) bf16, optional (empty)
  Tensor xn;           // (T, D) act out: normalised x, the MoE's input
  Tensor logits;       // (T, E) act or f32 out
  Tensor ids;          // (T, K) i32 out, optional (with weights)
  Tensor weights;      // (T, K) f32 out, optional (with ids)
};
Status moe_router(Context& cx, const MoeRouterArgs& a);

// MXFP4 expert weights of one layer, in the checkpoint layout (GPTOSS_SPEC §2.1, §3) unless a
// backend repacked them at load (see docs/KERNELS.md).
struct MoeWeights {
  Tensor gate_up_blocks;  // (E, 2F, D/32, 16) u8, rows interleaved gate/up
  Tensor gate_up_scales;  // (E, 2F, D/32) u8 e8m0
  Tensor gate_up_bias;    // (E, 2F) bf16
  Tensor down_blocks;     // (E, D, F/32, 16) u8
  Tensor down_scales;     // (E, D, F/32) u8
  Tensor down_bias;       // (E, D) bf16
};

// MoeActivation (context.h): the activations of the many-token MoE GEMMs; --moe-activation parses as
std::optional<MoeActivation> parse_moe_activation(std::string_view name);  // "bf16" | "fp8"

// Where moe's experts come from: the top-k ids and weights (FromIds: read), or the router logits
// (FromLogits: the op selects ids, weights = router_topk(logits) itself and writes them; on CUDA
// for decode inside the expert kernels, which saves a pass over the stored logits).
enum class MoeRouting { FromIds, FromLogits };

// residual += Σ_k weights[t,k] · Expert_{ids[t,k]}(x[t]) with the clamped SwiGLU of spec §4.7.
struct MoeArgs {
  Tensor x;  // (T, D) act in: normalised input
  MoeRouting routing = MoeRouting::FromIds;
  Tensor ids;      // (T, K) i32: in (FromIds) or out (FromLogits)
  Tensor weights;  // (T, K) f32: likewise
  Tensor logits;   // (T, E) act or f32 in, FromLogits only: the router logits to select from
  MoeWeights w;
  float swiglu_limit = 7.0f;
  float swiglu_alpha = 1.702f;
  Tensor residual;  // (T, D) act, updated in place
  MoeActivation activation = MoeActivation::Default;
};
Status moe(Context& cx, const MoeArgs& a);
// Whether moe, given router logits, selects the experts inside its own kernels (the CUDA decode
// GEMVs, T <= the grouped threshold): the forward then stops the router at the logits. Otherwise
// the router writes the top-k ids and weights (moe_router with ids) and moe takes them.
bool moe_selects_from_logits(Device dev, int64_t T, int64_t E);

// Copies rows: out[i] = x[rows[i]] (selecting which tokens need logits).
struct GatherRowsArgs {
  Tensor x;     // (T, D) act
  Tensor rows;  // (R) i32
  Tensor out;   // (R, D) act
};
Status gather_rows(Context& cx, const GatherRowsArgs& a);

// The gated activation of a Llama-style MLP (the EAGLE-3 draft model): out[t][i] = silu(gate[t][i])
// · up[t][i] with silu(g) = g / (1 + exp(-g)), computed in FP32 and rounded once to the act dtype.
// I is the MLP's intermediate width.
struct SiluMulArgs {
  Tensor gate_up;  // (T, 2·I) act: gate in columns [0, I), up in columns [I, 2I)
  Tensor out;      // (T, I) act; must not alias gate_up
};
Status silu_mul(Context& cx, const SiluMulArgs& a);

// ---- utility ops (synthetic weights, on-device greedy decoding) ----------------------------
// Fills a tensor with seeded pseudo-random values: floats uniform in [offset - scale,
// offset + scale] (f32/bf16), or bytes uniform in [byte_lo, byte_hi] (u8). Deterministic in
// (seed, element index) on every backend.
struct FillRandomArgs {
  Tensor out;
  uint64_t seed = 0;
  float scale = 1.0f, offset = 0.0f;
  int byte_lo = 0, byte_hi = 255;
};
Status fill_random(Context& cx, const FillRandomArgs& a);

// Samples one token per row: greedy (lowest index of the max) when temperature <= 0; else from
// softmax(logits / temperature) restricted to the tokens whose logit is >= each active threshold:
// the top_k-th largest logit (top_k > 0), the largest logit t with P(logit >= t) >= top_p
// (top_p < 1), and m + temperature·ln(min_p) (min_p > 0). Ties at a threshold are kept. The draw
// is u = hash(seed, position) in [0, 1), taken by inverse CDF in token-id order, so a step is
// reproducible and identical (up to float rounding at a bucket edge) on every backend.
struct SampleArgs {
  Tensor logits;     // (R, V) f32
  Tensor params;     // (R, 4) f32: temperature, top_p, min_p, top_k
  Tensor seeds;      // (R) i32
  Tensor positions;  // (R) i32: varies the draw from step to step
  Tensor ids;        // (R) i32 out
};
Status sample(Context& cx, const SampleArgs& a);

// ---- the engine step's sampling stage (runtime/step_runner.cpp runs them in this order) ------
// 1. logprobs_topk over the raw logits, 2. logits_process, 3. sample, 4. logprobs_chosen.
constexpr int kMaxTopLogprobs = 20;

// Per row with k = rows_k[r] >= 0: the log-sum-exp of the raw row and its k most likely ids
// (higher logit first, lower id first on ties) with their log-probabilities (logit - lse).
// Rows with k < 0 are left untouched. Columns >= min(k, V) of ids/logprobs are unspecified.
// NaN logits count as -inf (no mass, ranked with -inf); a row whose max is +-inf has lse = max.
// k > kMaxTopLogprobs is refused on the CPU and clamped on CUDA (rows_k is device data there).
struct LogprobsTopkArgs {
  Tensor logits;    // (R, V) f32, the raw logits
  Tensor rows_k;    // (R) i32: alternatives wanted per row, -1 = no logprobs
  Tensor lse;       // (R) f32 out
  Tensor top_ids;   // (R, kMaxTopLogprobs) i32 out
  Tensor top_logprobs;  // (R, kMaxTopLogprobs) f32 out
};
Status logprobs_topk(Context& cx, const LogprobsTopkArgs& a);

// One logits-processing entry of a row: a token of the row's history (penalties), an additive
// bias (logit_bias), a ban (min_tokens: eos and stop ids are -inf until then) or 32 bits of a
// guided-decoding mask (token: the first id of the 32, a multiple of 32; aux: bit b set = id
// token + b allowed; the row's ids that no Mask entry covers stay allowed, unless the row has a
// MaskOthers entry: then they are forbidden. MaskOthers (token 0, count: the number of Mask entries)
// comes right before the row's Mask entries, which then run in increasing token order; the host
// sends this form where the row allows fewer words than it forbids, so that a mask of a few
// allowed tokens is a few entries, not one per word of the vocabulary).
enum class LogitsEntryKind : int32_t { Penalty = 0, Bias = 1, Ban = 2, Mask = 3, MaskOthers = 4 };
struct LogitsEntry {
  int32_t token = 0;
  LogitsEntryKind kind = LogitsEntryKind::Penalty;
  int32_t count = 0;  // Penalty: occurrences among the generated tokens (frequency/presence)
  int32_t aux = 0;    // Penalty: 1 if the token is in the prompt (repetition); Bias: the f32 bias's bits;
                      // Mask: the allowed bits
};
static_assert(sizeof(LogitsEntry) == 16);

// Per row, in place, in this order: (1) penalties, each Penalty entry's token once (the host gives
// one entry per distinct token): repetition r (HF/vLLM rule, prompt or generated: x > 0 ? x / r : x * r),
// then x -= frequency * count + presence * (count > 0); (2) x += bias for each Bias entry; (3) x =
// -inf for each Ban entry; (4) x = -inf for each id whose bit a Mask entry clears (ids >= V
// ignored), and with a MaskOthers entry for each id outside the Mask entries' words. The entries of row r are entries[offsets[r] .. offsets[r + 1]), ordered Penalty,
// Bias, Ban, MaskOthers, Mask (a token may appear once per kind). saved[i] receives the value entry i's token
// held before this op touched the row (the raw logit for the first entry of a token), for
// logprobs_chosen (every entry's saved value is raw on both backends). Rows without entries are
// not read. On the CPU bad offsets or entries are refused; on CUDA they are device data: offsets
// are clamped to [0, N] and entries with a token outside [0, V) skipped.
struct LogitsProcessArgs {
  Tensor logits;     // (R, V) f32, updated in place
  Tensor penalties;  // (R, 3) f32: repetition (1 = off), presence (0 = off), frequency (0 = off)
  Tensor offsets;    // (R + 1) i32
  Tensor entries;    // (N, 4) i32: LogitsEntry records (N >= offsets[R]; may be larger)
  Tensor saved;      // (N) f32 out
};
Status logits_process(Context& cx, const LogitsProcessArgs& a);

// Per row with rows_k[r] >= 0: logprob[r] = raw(ids[r]) - lse[r], where raw(v) is saved[i] of the
// first entry i of the row with token v, else logits[r, v] (a token no entry touched is raw).
// An id outside [0, V) is refused on the CPU and gives NaN on CUDA.
struct LogprobsChosenArgs {
  Tensor logits;    // (R, V) f32, processed
  Tensor offsets;   // (R + 1) i32, as given to logits_process
  Tensor entries;   // (N, 4) i32
  Tensor saved;     // (N) f32
  Tensor ids;       // (R) i32, the sampled ids
  Tensor rows_k;    // (R) i32
  Tensor lse;       // (R) f32 from logprobs_topk
  Tensor logprobs;  // (R) f32 out
};
Status logprobs_chosen(Context& cx, const LogprobsChosenArgs& a);

// ---- the engine step's prologue (graph-safe: counts are read on the device) ------------------
// tokens[i] = prev[from[i]] for every i with from[i] >= 0: a decode token that the previous step
// sampled on the device, not yet seen by the host.
struct TakePrevTokensArgs {
  Tensor tokens;  // (T) i32, updated
  Tensor from;    // (T) i32: index into prev, or -1
  Tensor prev;    // (P) i32: the previous step's sampled ids
};
Status take_prev_tokens(Context& cx, const TakePrevTokensArgs& a);

// tables[u.row][u.index] = u.block for the first count[0] updates (the engine's persistent block
// tables grow by the blocks each step appends).
struct TableUpdatesArgs {
  Tensor tables;   // (S, max_blocks) i32, updated
  Tensor updates;  // (U, 3) i32: row, index, block
  Tensor count;    // (1) i32: how many of the U updates to apply
};
Status apply_table_updates(Context& cx, const TableUpdatesArgs& a);

// x[i] += value for an i32 tensor (advances decode positions inside a captured step).
struct AddI32Args {
  Tensor x;
  int32_t value = 1;
};
Status add_i32(Context& cx, const AddI32Args& a);

// The backend's path choices and their thresholds under a context's settings, one line each
// (logged once at start-up).
std::vector<std::string> dispatch_summary(const Context& cx);


}  // namespace mx::ops
