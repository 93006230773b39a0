// Launchers of the dense CUDA ops (embed, gather_rows, rmsnorm, silu_mul, and linear, with or without an input
// RMSNorm, as the GEMV kernel or cuBLASLt — dispatch.cpp chooses; qkv_projection as the GEMV with
// its RoPE + cache epilogue): each checks its kernel's contract and returns a Status. MXFP4 dense
// weights (--mxfp4-layers) take bf16_mxfp4w_gemv, or cuBLASLt on BF16 chunks that
// mxfp4_rows_to_bf16 decodes into the workspace.
#include <cublasLt.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "kernels/cuda/bf16_silu_mul.h"
#include "kernels/cuda/launch_util.h"

namespace mx::cuda {
namespace {

constexpr size_t kCublasLtWorkspace = 32u << 20;
// BF16 weight rows decoded per cuBLASLt call on the MXFP4 path: always this much workspace (not
// the matrix's size), so that a graph-captured step never needs a larger one than the eager steps.
constexpr size_t kDecodedChunkBytes = 64u << 20;

// MXFP4 weights: the FP32-FMA kernel for one token (one round trip per row, no FP16 staging),
// the tensor-core one for 2..kMxfp4MmaMaxTokens: on the H100 (`bench_sweeps mxfp4_gemv`)
// the FP32 kernel wins at T = 1 and the mma kernel from T = 2 on lm_head, the largest matrix
// (docs/lab/RUNS_21-30.md, run 22).
bool mxfp4_mma(const ops::LinearArgs& a) { return ops::is_mxfp4(a.w_scales) && a.x.dim(0) > 1; }

// Whether the GEMV's shared memory (x' staging with an input norm; the mma kernel always stages)
// fits its limit.
bool smem_fits(const ops::LinearArgs& a) {
  const int64_t T = a.x.dim(0), Kin = a.x.dim(1);
  const bool norm = !a.norm.weight.empty();
  if (mxfp4_mma(a)) return kern::mxfp4_gemv_mma_smem_bytes(T, Kin, norm) <= kern::kMxfp4GemvMaxSmem;
  return !norm || kern::gemv_smem_bytes(T, Kin, true) <= kern::kGemvMaxSmem;
}

int64_t gemv_max_tokens(const ops::LinearArgs& a) {
  return ops::is_mxfp4(a.w_scales) ? kern::kMxfp4MmaMaxTokens : kern::kGemvMaxTokens;
}

// The GEMV kernel of a weight format and token count.
const char* gemv_name(const ops::LinearArgs& a) {
  return !ops::is_mxfp4(a.w_scales) ? "bf16_bf16w_gemv" : mxfp4_mma(a) ? "bf16_mxfp4w_gemv_mma" : "bf16_mxfp4w_gemv";
}
cudaError_t run_gemv(const kern::GemvParams& p, cudaStream_t s) {
  if (!p.w_scales) return kern::run_bf16_bf16w_gemv(p, s);
  return p.T > 1 ? kern::run_bf16_mxfp4w_gemv_mma(p, s) : kern::run_bf16_mxfp4w_gemv(p, s);
}

// bf16_gather_rows' contract (gather_rows, and embed from a bf16 table), with the reason it fails
// (empty when the kernel can run).
std::string gather_rows_contract_violation(const Tensor& table, const Tensor& rows, const Tensor& out) {
  if (table.dtype != DType::BF16 || out.dtype != DType::BF16)
    return fmt::format("needs bf16 rows (table {}, out {})", dtype_name(table.dtype), dtype_name(out.dtype));
  if (out.data == table.data && rows.dim(0) != 0) return "out must not alias the rows it reads";
  return {};
}

Status launch_bf16_gather_rows(Backend& b, const Tensor& table, const Tensor& rows, const Tensor& out) {
  const std::string bad = gather_rows_contract_violation(table, rows, out);
  MX_CHECK(bad.empty(), "bf16_gather_rows: {}", bad);
  const kern::GatherRowsParams p{.table = table.data, .rows = rows.ptr<const int32_t>(), .out = out.data,
                                 .n_rows = table.dim(0), .width = table.dim(1), .R = rows.dim(0)};
  return kernel_status("bf16_gather_rows", kern::run_bf16_gather_rows(p, b.stream()));
}

// The GEMV's contract (gemv_name(a): the BF16 or an MXFP4 kernel), with the reason it fails (empty
// when the kernel can run); dispatch asks first (linear_gemv_supported).
std::string gemv_contract_violation(const ops::LinearArgs& a) {
  const int64_t T = a.x.dim(0), Kin = a.x.dim(1);
  const bool mxfp4 = ops::is_mxfp4(a.w_scales);
  const int64_t kin_multiple = mxfp4 ? 32 : 8;
  if (T > gemv_max_tokens(a)) return fmt::format("{} tokens > {}", T, gemv_max_tokens(a));
  if (Kin % kin_multiple != 0) return fmt::format("Kin={} is not a multiple of {}", Kin, kin_multiple);
  if (!aligned16(a.x.data) || !aligned16(a.w.data) || (mxfp4 && !aligned16(a.w_scales.data)))
    return mxfp4 ? "x, w and w_scales must be 16-byte aligned" : "x and w must be 16-byte aligned";
  if (!smem_fits(a)) return fmt::format("{} tokens of {} features do not fit the shared-memory staging", T, Kin);
  if (!a.norm.weight.empty()) {
    if (a.norm.weight.dtype != DType::BF16 || !aligned16(a.norm.weight.data))
      return fmt::format("the input norm weight must be bf16 and 16-byte aligned (got {})",
                         dtype_name(a.norm.weight.dtype));
    if (a.out.data == a.x.data) return "out must not alias x with an input norm";
  }
  return {};
}

// The GEMV's parameters for a linear (its contract checked by the caller).
kern::GemvParams gemv_params(const ops::LinearArgs& a) {
  const bool norm = !a.norm.weight.empty();
  return {.x = a.x.data, .w = a.w.data, .bias = a.bias.data, .out = a.out.data,
          .out_f32 = a.out.dtype == DType::F32, .accumulate = a.accumulate == ops::Accumulate::IntoOut,
          .T = a.x.dim(0), .N = a.w.dim(0), .Kin = a.x.dim(1), .norm_weight = norm ? a.norm.weight.data : nullptr,
          .norm_eps = a.norm.eps, .w_scales = ops::is_mxfp4(a.w_scales) ? a.w_scales.data : nullptr};
}

Status launch_gemv(Backend& b, const ops::LinearArgs& a) {
  const std::string bad = gemv_contract_violation(a);
  MX_CHECK(bad.empty(), "{}: {}", gemv_name(a), bad);
  return kernel_status(gemv_name(a), run_gemv(gemv_params(a), b.stream()));
}

ops::LinearArgs linear_of(const ops::QkvProjectionArgs& a) {
  return {.x = a.x, .w = a.w, .bias = a.bias, .out = a.qkv, .norm = a.norm, .w_scales = a.w_scales};
}

// The GEMV with the qkv epilogue: the GEMV's contract, the rotation tiles, a bf16 qkv and the
// cache layout; the reason it fails (empty when it can run). dispatch asks first
// (qkv_projection_fused_supported).
std::string qkv_epilogue_contract_violation(const ops::QkvProjectionArgs& a) {
  const ops::LinearArgs lin = linear_of(a);
  if (std::string bad = gemv_contract_violation(lin); !bad.empty()) return bad;
  if (mxfp4_mma(lin) && a.head_dim % 16 != 0)  // bf16_mxfp4w_gemv_mma's rotation tiles
    return fmt::format("head_dim={} is not a multiple of 16", a.head_dim);
  if (a.qkv.dtype != DType::BF16) return fmt::format("qkv must be bf16 (got {})", dtype_name(a.qkv.dtype));
  return kv_cache_contract_violation(a.cache, a.batch);
}

// qkv_projection as one GEMV: the qkv epilogue rotates q, k and writes k, v to the cache.
Status launch_gemv_rope_cache(Backend& b, const ops::QkvProjectionArgs& a) {
  const ops::LinearArgs lin = linear_of(a);
  const std::string name = fmt::format("{} (qkv epilogue)", gemv_name(lin));
  const std::string bad = qkv_epilogue_contract_violation(a);
  MX_CHECK(bad.empty(), "{}: {}", name, bad);
  kern::GemvParams p = gemv_params(lin);
  p.rope_cache = true;
  p.rope = {.qkv = a.qkv.data, .inv_freq = a.rope.inv_freq.ptr<const float>(), .concentration = a.rope.concentration,
            .positions = a.batch.positions.ptr<const int32_t>(), .seq_index = a.batch.seq_index.ptr<const int32_t>(),
            .block_tables = a.batch.block_tables.ptr<const int32_t>(), .k_cache = a.cache.k.data,
            .v_cache = a.cache.v.data, .kv_scales = kv_scales_of(a.cache), .T = a.qkv.dim(0),
            .max_blocks = a.batch.block_tables.dim(1),
            .block_size = a.cache.k.dim(1), .H = a.n_heads, .Hkv = a.n_kv_heads, .Dh = a.head_dim};
  return kernel_status(name.c_str(), run_gemv(p, b.stream()));
}

#define MX_CUBLAS(call)                                                                        \
  do {                                                                                         \
    const cublasStatus_t _st = (call);                                                         \
    MX_CHECK(_st == CUBLAS_STATUS_SUCCESS, "cuBLASLt: {} failed with status {}", #call, int(_st)); \
  } while (0)

// Owns the cuBLASLt descriptors of one call.
struct LtDescs {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  ~LtDescs() {
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (c) cublasLtMatrixLayoutDestroy(c);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (op) cublasLtMatmulDescDestroy(op);
  }
};

// out[:, 0..n) (T rows, row stride ldo) = x (T, Kin) . W^T (+ out when beta = 1), W (n, Kin) BF16:
// column-major out^T = W . x^T, i.e. D (n x T, ld ldo) = op_T(A: Kin x n, ld Kin) . B (Kin x T, ld
// Kin). ws: cuBLASLt's kCublasLtWorkspace bytes.
Status lt_matmul(Backend& b, const void* w, int64_t n, const void* x, int64_t T, int64_t Kin, void* out, int64_t ldo,
                 bool out_f32, float beta, void* ws) {
  void* lt;
  MX_ASSIGN(lt, b.lt_handle());
  const auto handle = static_cast<cublasLtHandle_t>(lt);
  LtDescs d;
  const float alpha = 1.0f;
  const cublasOperation_t trans_a = CUBLAS_OP_T, trans_b = CUBLAS_OP_N;
  const cudaDataType_t out_type = out_f32 ? CUDA_R_32F : CUDA_R_16BF;
  MX_CUBLAS(cublasLtMatmulDescCreate(&d.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  MX_CUBLAS(cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_TRANSA, &trans_a, sizeof(trans_a)));
  MX_CUBLAS(cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_TRANSB, &trans_b, sizeof(trans_b)));
  MX_CUBLAS(cublasLtMatrixLayoutCreate(&d.a, CUDA_R_16BF, uint64_t(Kin), uint64_t(n), Kin));
  MX_CUBLAS(cublasLtMatrixLayoutCreate(&d.b, CUDA_R_16BF, uint64_t(Kin), uint64_t(T), Kin));
  MX_CUBLAS(cublasLtMatrixLayoutCreate(&d.c, out_type, uint64_t(n), uint64_t(T), ldo));
  MX_CUBLAS(cublasLtMatmulPreferenceCreate(&d.pref));
  const uint64_t ws_bytes = kCublasLtWorkspace;
  MX_CUBLAS(cublasLtMatmulPreferenceSetAttribute(d.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes,
                                                 sizeof(ws_bytes)));
  cublasLtMatmulHeuristicResult_t heur{};
  int found = 0;
  MX_CUBLAS(cublasLtMatmulAlgoGetHeuristic(handle, d.op, d.a, d.b, d.c, d.c, d.pref, 1, &heur, &found));
  MX_CHECK(found > 0, "cuBLASLt: no algorithm for a {}x{}x{} BF16 GEMM", T, n, Kin);
  MX_CUBLAS(cublasLtMatmul(handle, d.op, &alpha, w, d.a, x, d.b, &beta, out, d.c, out, d.c, &heur.algo, ws,
                           kCublasLtWorkspace, b.stream()));
  return ok_status();
}

size_t round256(size_t b) { return (b + 255) / 256 * 256; }

// MXFP4 weight rows decoded per cuBLASLt call: multiples of 128 in kDecodedChunkBytes (Kin > 0).
int64_t decoded_chunk_rows(int64_t Kin) {
  return std::max<int64_t>(128, int64_t(kDecodedChunkBytes / size_t(2 * Kin)) / 128 * 128);
}

// cuBLASLt on MXFP4 weights: mxfp4_rows_to_bf16's contract on the decoded chunks, with the reason it
// fails (empty when it can run, and for BF16 weights).
std::string mxfp4_gemm_contract_violation(const ops::LinearArgs& a) {
  if (!ops::is_mxfp4(a.w_scales)) return {};
  const int64_t Kin = a.x.dim(1);
  if (Kin <= 0 || Kin % 32 != 0) return fmt::format("Kin={} is not a positive multiple of 32", Kin);
  if (!aligned16(a.w.data)) return "the weight blocks must be 16-byte aligned";
  if (size_t(decoded_chunk_rows(Kin) * Kin * 2) > kDecodedChunkBytes)
    return fmt::format("{} input features are too many (128 decoded rows exceed {} bytes)", Kin, kDecodedChunkBytes);
  return {};
}

// out (T, N) = x' . W^T + bias (+ out): the bias pre-pass (in the rmsnorm kernel's launch when
// there is an input norm and out is not accumulated), with an input norm the rmsnorm kernel
// writing x' to the workspace, then cuBLASLt — on the BF16 weights, or for MXFP4 weights on chunks
// of rows decoded into the workspace (multiples of 128 rows, so every chunk's out columns start
// 256-byte aligned).
Status launch_linear_gemm(Backend& b, const ops::LinearArgs& a) {
  const std::string bad = mxfp4_gemm_contract_violation(a);
  MX_CHECK(bad.empty(), "mxfp4_rows_to_bf16 (linear): {}", bad);
  const int64_t T = a.x.dim(0), Kin = a.x.dim(1), N = a.w.dim(0);
  const bool norm = !a.norm.weight.empty(), mxfp4 = ops::is_mxfp4(a.w_scales);
  const size_t xn_bytes = norm ? round256(size_t(T * Kin) * 2) : 0;
  const bool out_f32 = a.out.dtype == DType::F32, acc = a.accumulate == ops::Accumulate::IntoOut;
  const bool bias = !a.bias.empty(), bias_in_norm = bias && norm && !acc;
  if (bias && !bias_in_norm)  // out = bias or out += bias first, then the GEMM adds into it (beta = 1)
    MX_TRY(kernel_status("bias_broadcast",
                         kern::run_bias_broadcast(a.out.data, out_f32, a.bias.data, acc, T, N, b.stream())));
  const float beta = (bias || acc) ? 1.0f : 0.0f;
  void* ws;
  MX_ASSIGN(ws, b.workspace(kCublasLtWorkspace + xn_bytes + (mxfp4 ? kDecodedChunkBytes : 0), "linear_gemm"));
  const void* x = a.x.data;
  if (norm) {
    void* xn = static_cast<char*>(ws) + kCublasLtWorkspace;
    const kern::RmsNormParams p{.x = a.x.data, .weight = a.norm.weight.data,
                                .weight_f32 = a.norm.weight.dtype == DType::F32, .out = xn, .T = T, .D = Kin,
                                .eps = a.norm.eps, .bias = bias_in_norm ? a.bias.data : nullptr,
                                .bias_out = a.out.data, .bias_out_f32 = out_f32, .bias_n = N};
    MX_TRY(kernel_status("bf16_bf16w_rmsnorm", kern::run_bf16_bf16w_rmsnorm(p, b.stream())));
    x = xn;
  }
  if (!mxfp4) return lt_matmul(b, a.w.data, N, x, T, Kin, a.out.data, N, out_f32, beta, ws);
  void* decoded = static_cast<char*>(ws) + kCublasLtWorkspace + xn_bytes;
  const int64_t chunk = decoded_chunk_rows(Kin);
  const size_t out_elem = out_f32 ? 4 : 2;
  for (int64_t n0 = 0; n0 < N; n0 += chunk) {
    const int64_t n = std::min(chunk, N - n0);
    const kern::Mxfp4RowsParams p{.blocks = a.w.data, .scales = a.w_scales.data, .rows = nullptr, .first = n0,
                                  .n_rows = N, .width = Kin, .R = n, .out = decoded};
    MX_TRY(kernel_status("mxfp4_rows_to_bf16", kern::run_mxfp4_rows_to_bf16(p, b.stream())));
    MX_TRY(lt_matmul(b, decoded, n, x, T, Kin, static_cast<char*>(a.out.data) + size_t(n0) * out_elem, N, out_f32,
                     beta, ws));
  }
  return ok_status();
}

// mxfp4_rows_to_bf16's contract for embed (rows of an MXFP4 table), with the reason it fails (empty
// when the kernel can run).
std::string embed_mxfp4_contract_violation(const ops::EmbedArgs& a) {
  if (a.out.dtype != DType::BF16) return fmt::format("out must be bf16 (got {})", dtype_name(a.out.dtype));
  if (a.out.dim(1) % 32 != 0) return fmt::format("row width {} is not a multiple of 32", a.out.dim(1));
  if (!aligned16(a.table.data) || !aligned16(a.out.data)) return "the table and out must be 16-byte aligned";
  return {};
}

// bf16_silu_mul's contract, with the reason it fails (empty when the kernel can run).
std::string silu_mul_contract_violation(const ops::SiluMulArgs& a) {
  const int64_t T = a.out.dim(0), I = a.out.dim(1);
  if (a.gate_up.dtype != DType::BF16 || a.out.dtype != DType::BF16)
    return fmt::format("needs bf16 gate_up and out (got {}, {})", dtype_name(a.gate_up.dtype), dtype_name(a.out.dtype));
  if (a.gate_up.dim(0) != T || a.gate_up.dim(1) != 2 * I)
    return fmt::format("gate_up {} for out {} (needs (T, 2I))", a.gate_up.shape_str(), a.out.shape_str());
  if (T * I / 256 >= INT32_MAX) return fmt::format("{} outputs exceed the grid", T * I);
  return {};
}

}  // namespace

Status embed(Backend& b, const ops::EmbedArgs& a) {
  if (!ops::is_mxfp4(a.table_scales)) return launch_bf16_gather_rows(b, a.table, a.ids, a.out);
  const std::string bad = embed_mxfp4_contract_violation(a);
  MX_CHECK(bad.empty(), "mxfp4_rows_to_bf16 (embed): {}", bad);
  const kern::Mxfp4RowsParams p{.blocks = a.table.data, .scales = a.table_scales.data,
                                .rows = a.ids.ptr<const int32_t>(), .first = 0, .n_rows = a.table.dim(0),
                                .width = a.out.dim(1), .R = a.ids.dim(0), .out = a.out.data};
  return kernel_status("mxfp4_rows_to_bf16 (embed)", kern::run_mxfp4_rows_to_bf16(p, b.stream()));
}

Status gather_rows(Backend& b, const ops::GatherRowsArgs& a) { return launch_bf16_gather_rows(b, a.x, a.rows, a.out); }

Status silu_mul(Backend& b, const ops::SiluMulArgs& a) {
  const std::string bad = silu_mul_contract_violation(a);
  MX_CHECK(bad.empty(), "bf16_silu_mul: {}", bad);
  const kern::SiluMulParams p{.gate_up = a.gate_up.data, .out = a.out.data, .T = a.out.dim(0), .I = a.out.dim(1)};
  return kernel_status("bf16_silu_mul", kern::run_bf16_silu_mul(p, b.stream()));
}

Status rmsnorm(Backend& b, const ops::RmsNormArgs& a) {
  const kern::RmsNormParams p{.x = a.x.data, .weight = a.weight.data, .weight_f32 = a.weight.dtype == DType::F32,
                              .out = a.out.data, .T = a.x.dim(0), .D = a.x.dim(1), .eps = a.eps};
  return kernel_status("bf16_bf16w_rmsnorm", kern::run_bf16_bf16w_rmsnorm(p, b.stream()));
}

// cuBLASLt's workspace, the normalised x of the largest call and one chunk of decoded MXFP4 rows.
size_t linear_gemm_scratch_bytes(const ops::CallShapes& s) {
  return kCublasLtWorkspace + round256(size_t(s.max_tokens * s.max_in_features) * 2) + kDecodedChunkBytes;
}

const char* linear_gemv_kernel_name(const ops::LinearArgs& a) { return gemv_name(a); }
const char* qkv_projection_kernel_name(const ops::QkvProjectionArgs& a) { return gemv_name(linear_of(a)); }

bool linear_gemv_supported(const ops::LinearArgs& a) { return gemv_contract_violation(a).empty(); }

bool qkv_projection_fused_supported(const ops::QkvProjectionArgs& a) {
  return qkv_epilogue_contract_violation(a).empty();
}

Status qkv_projection_fused(Backend& b, const ops::QkvProjectionArgs& a) {
  return a.x.dim(0) == 0 ? ok_status() : launch_gemv_rope_cache(b, a);
}

Status linear_gemv(Backend& b, const ops::LinearArgs& a) {
  return a.x.dim(0) == 0 ? ok_status() : launch_gemv(b, a);
}

Status linear_gemm(Backend& b, const ops::LinearArgs& a) {
  return a.x.dim(0) == 0 ? ok_status() : launch_linear_gemm(b, a);
}

}  // namespace mx::cuda
