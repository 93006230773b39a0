// bench_kernels: times the batch-1 decode kernels (MoE MXFP4 GEMV, dense GEMV, attention decode)
// as CUDA-graph replays over weights rotated past L2, and prints achieved GB/s against the
// device-to-device copy bandwidth measured first; then the prefill attention kernels (TFLOP/s) and
// both attention paths at small T (the dispatch threshold). Each row starts with the stem of the
// kernel it times (docs/KERNELS.md). Usage: bench_kernels [attention|prefill|moe]
// (`attention`: the decode-attention rows only; `prefill`: the prefill attention rows only; `moe`:
// the MoE GEMV row only).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "bench_util.h"
#include "kernels/cuda/backend.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/heuristics.h"
#include "kernels/ops.h"
#include "bench_context.h"

namespace {
using namespace mx;

void must(const Status& s) {
  if (!s.ok()) {
    std::fprintf(stderr, "error: %s\n", s.message().c_str());
    std::exit(1);
  }
}

std::vector<ops::Buffer> g_keep;  // device allocations live until exit

// A device tensor filled with pseudo-random bytes (xorshift), bf16 values kept finite/small.
Tensor random_tensor(DType dtype, std::initializer_list<int64_t> shape, uint64_t seed, int lo = 0, int hi = 255) {
  Tensor probe(nullptr, dtype, shape, Device::CUDA);
  std::vector<uint8_t> h(probe.nbytes());
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i < h.size(); ++i) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    h[i] = uint8_t(lo + int(s % uint64_t(hi - lo + 1)));
  }
  if (dtype == DType::BF16)  // high byte 0x3c..0x3f or 0xbc..0xbf: |v| in [2^-7, 2)
    for (size_t i = 1; i < h.size(); i += 2) h[i] = uint8_t((h[i] & 0x80) | 0x3c | (h[i] & 3));
  g_keep.push_back(std::move(ops::Buffer::allocate(Device::CUDA, h.size()).value()));
  Tensor t = g_keep.back().view(dtype, shape);
  must(ops::copy(t, Tensor(h.data(), dtype, shape)));
  return t;
}

// Median-free simple timing: one eager call per variant, then a graph of all `calls` variants
// replayed `reps` times; returns microseconds per call.
double time_graph(int calls, int reps, const std::function<void(int)>& call) {
  cudaStream_t st;
  CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  cuda::Backend& backend = *bench::ctx().cuda();  // the ops queue on the timed stream
  backend.set_stream(st);
  for (int i = 0; i < calls; ++i) call(i);
  CK(cudaStreamSynchronize(st));
  cudaGraph_t g;
  cudaGraphExec_t ge;
  CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < calls; ++i) call(i);
  CK(cudaStreamEndCapture(st, &g));
  CK(cudaGraphInstantiate(&ge, g, 0));
  CK(cudaGraphLaunch(ge, st));
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  CK(cudaEventRecord(a, st));
  for (int r = 0; r < reps; ++r) CK(cudaGraphLaunch(ge, st));
  CK(cudaEventRecord(b, st));
  CK(cudaEventSynchronize(b));
  float ms = 0;
  CK(cudaEventElapsedTime(&ms, a, b));
  CK(cudaGraphExecDestroy(ge));
  CK(cudaGraphDestroy(g));
  backend.set_stream(nullptr);
  CK(cudaStreamDestroy(st));
  return 1000.0 * ms / (reps * calls);
}

double g_copy_gbs = 0;
void report(const char* name, double us, double bytes) {
  const double gbs = bytes / us / 1e3;
  std::printf("| %-44s | %9.1f | %8.1f | %7.0f | %5.1f%% |\n", name, us, bytes / 1e6, gbs, 100.0 * gbs / g_copy_gbs);
}

void bench_copy() {
  const size_t n = size_t(1) << 30;
  void *a, *b;
  CK(cudaMalloc(&a, n));
  CK(cudaMalloc(&b, n));
  CK(cudaMemset(a, 1, n));
  CK(cudaMemcpy(b, a, n, cudaMemcpyDeviceToDevice));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  CK(cudaEventRecord(e0));
  for (int i = 0; i < 20; ++i) CK(cudaMemcpyAsync(b, a, n, cudaMemcpyDeviceToDevice));
  CK(cudaEventRecord(e1));
  CK(cudaEventSynchronize(e1));
  float ms = 0;
  CK(cudaEventElapsedTime(&ms, e0, e1));
  g_copy_gbs = 20.0 * 2 * double(n) / (ms * 1e6);  // bytes read + written
  CK(cudaFree(a));
  CK(cudaFree(b));
}

void bench_moe() {
  const int64_t E = 128, D = 2880, F = 2880, K = 4, sets = 32;  // 120b layer; 32 disjoint expert sets
  ops::MoeWeights w{.gate_up_blocks = random_tensor(DType::U8, {E, 2 * F, D / 32, 16}, 1),
                    .gate_up_scales = random_tensor(DType::U8, {E, 2 * F, D / 32}, 2, 118, 122),
                    .gate_up_bias = random_tensor(DType::BF16, {E, 2 * F}, 3),
                    .down_blocks = random_tensor(DType::U8, {E, D, F / 32, 16}, 4),
                    .down_scales = random_tensor(DType::U8, {E, D, F / 32}, 5, 116, 120),
                    .down_bias = random_tensor(DType::BF16, {E, D}, 6)};
  std::vector<int32_t> ids_h(size_t(sets * K));
  for (int64_t i = 0; i < sets * K; ++i) ids_h[size_t(i)] = int32_t((i * 37) % E);  // distinct within a set
  g_keep.push_back(std::move(ops::Buffer::allocate(Device::CUDA, ids_h.size() * 4).value()));
  Tensor ids = g_keep.back().view(DType::I32, {sets, K});
  must(ops::copy(ids, Tensor(ids_h.data(), DType::I32, {sets, K})));
  Tensor weights = random_tensor(DType::F32, {sets, K}, 7, 0, 60);
  Tensor x = random_tensor(DType::BF16, {1, D}, 8), res = random_tensor(DType::BF16, {1, D}, 9);
  const double us = time_graph(int(sets), 20, [&](int i) {
    must(ops::moe(bench::ctx(), {.x = x, .ids = ids.rows(i, 1), .weights = weights.rows(i, 1), .w = w, .residual = res}));
  });
  report("bf16_mxfp4w_moe_gemv T=1 E=128 K=4", us, double(K) * (2 * F + D) * (D / 32) * 17.0);
}

void bench_linear(const char* name, int64_t T, int64_t N, int64_t Kin, int copies, DType out_type) {
  std::vector<Tensor> ws;
  for (int c = 0; c < copies; ++c) ws.push_back(random_tensor(DType::BF16, {N, Kin}, 20 + c));
  Tensor x = random_tensor(DType::BF16, {T, Kin}, 30), out = random_tensor(out_type, {T, N}, 31, 0, 60);
  const double us = time_graph(copies, copies >= 8 ? 20 : 10,
                               [&](int i) { must(ops::linear(bench::ctx(), {.x = x, .w = ws[size_t(i)], .bias = {}, .out = out})); });
  report(name, us, double(N) * Kin * 2);
}

// fp8: the cache in E4M3 (--kv-cache-dtype fp8), codes 0x00..0x3f (finite) with scales 1/64.
void bench_attention(int depth, int window, bool fp8 = false) {
  const int H = 64, Hkv = 8, Dh = 64, B = 16, layers = 4;
  const int64_t blocks = 32768 / B + 1, width = (H + 2 * Hkv) * Dh;
  const DType kv = fp8 ? DType::F8_E4M3 : DType::BF16;
  const int hi = fp8 ? 0x3f : 255;
  Tensor scales = random_tensor(DType::F32, {2}, 39);
  const float sv[2] = {1.0f / 64, 1.0f / 64};
  must(ops::copy(scales, Tensor(const_cast<float*>(sv), DType::F32, {2})));
  std::vector<ops::KvLayer> caches;
  for (int l = 0; l < layers; ++l)
    caches.push_back({.k = random_tensor(kv, {blocks, B, Hkv, Dh}, 40 + l, 0, hi),
                      .v = random_tensor(kv, {blocks, B, Hkv, Dh}, 50 + l, 0, hi),
                      .scales = fp8 ? scales : Tensor()});
  std::vector<int32_t> table(static_cast<size_t>(blocks));
  for (int64_t i = 0; i < blocks; ++i) table[size_t(i)] = int32_t(i);
  const int32_t pos = depth, seq = 0;
  Tensor tbl = random_tensor(DType::I32, {1, blocks}, 60), p = random_tensor(DType::I32, {1}, 61),
         s = random_tensor(DType::I32, {1}, 62);
  must(ops::copy(tbl, Tensor(table.data(), DType::I32, {1, blocks})));
  must(ops::copy(p, Tensor(const_cast<int32_t*>(&pos), DType::I32, {1})));
  must(ops::copy(s, Tensor(const_cast<int32_t*>(&seq), DType::I32, {1})));
  Tensor qkv = random_tensor(DType::BF16, {1, width}, 63), sinks = random_tensor(DType::BF16, {H}, 64);
  Tensor out = random_tensor(DType::BF16, {1, H * Dh}, 65);
  const double us = time_graph(layers, 50, [&](int l) {
    must(ops::attention(bench::ctx(), {.qkv = qkv, .sinks = sinks, .n_heads = H, .n_kv_heads = Hkv, .head_dim = Dh, .window = window,
                         .batch = {.positions = p, .seq_index = s, .block_tables = tbl},
                         .cache = caches[size_t(l)], .out = out}));
  });
  std::string name = "bf16_attention_decode depth " + std::to_string(depth);
  if (window) name += " window " + std::to_string(window);
  if (fp8) name += " fp8";
  report(name.c_str(), us, double(window ? std::min(window, depth + 1) : depth + 1) * Hkv * Dh * 2 * (fp8 ? 1 : 2));
}

// gpt-oss attention (64 q / 8 kv heads, Dh 64) of one sequence's tokens depth..depth+T-1 over a
// cache holding them, by one CUDA entry point; returns microseconds per call.
double time_attention_chunk(int T, int depth, int window, const std::function<Status(const ops::AttentionArgs&)>& fn,
                            int reps) {
  const int H = 64, Hkv = 8, Dh = 64, B = 16;
  const int64_t blocks = (depth + T + B - 1) / B, width = (H + 2 * Hkv) * Dh;
  const ops::KvLayer cache{.k = random_tensor(DType::BF16, {blocks, B, Hkv, Dh}, 70),
                           .v = random_tensor(DType::BF16, {blocks, B, Hkv, Dh}, 71)};
  std::vector<int32_t> table(static_cast<size_t>(blocks)), pos(static_cast<size_t>(T)), seq(static_cast<size_t>(T), 0);
  for (int64_t i = 0; i < blocks; ++i) table[size_t(i)] = int32_t(i);
  for (int i = 0; i < T; ++i) pos[size_t(i)] = depth + i;
  Tensor tbl = random_tensor(DType::I32, {1, blocks}, 72), p = random_tensor(DType::I32, {T}, 73),
         s = random_tensor(DType::I32, {T}, 74);
  must(ops::copy(tbl, Tensor(table.data(), DType::I32, {1, blocks})));
  must(ops::copy(p, Tensor(pos.data(), DType::I32, {T})));
  must(ops::copy(s, Tensor(seq.data(), DType::I32, {T})));
  Tensor qkv = random_tensor(DType::BF16, {T, width}, 75), sinks = random_tensor(DType::BF16, {H}, 76);
  Tensor out = random_tensor(DType::BF16, {T, H * Dh}, 77);
  return time_graph(1, reps, [&](int) {
    must(fn({.qkv = qkv, .sinks = sinks, .n_heads = H, .n_kv_heads = Hkv, .head_dim = Dh, .window = window,
             .batch = {.positions = p, .seq_index = s, .block_tables = tbl}, .cache = cache, .out = out}));
  });
}

// Useful FLOPs of that call: 4·H·Dh per (token, visible key), QK^T and PV.
double attention_flops(int T, int depth, int window) {
  double keys = 0;
  for (int i = 0; i < T; ++i) keys += window > 0 ? std::min(window, depth + i + 1) : depth + i + 1;
  return 4.0 * 64 * 64 * keys;
}

void bench_attention_prefill() {
  std::printf("\n| attention, 64/8 heads, Dh 64 | us/call | GFLOP | TFLOP/s |\n|---|---|---|---|\n");
  std::vector<std::pair<const char*, cuda::PrefillKernel>> kernels{
      {"bf16_attention_prefill", cuda::PrefillKernel::kMmaSync}};
  if (cuda::attention_prefill_wgmma_available())
    kernels.emplace_back("sm90_bf16_attention_prefill", cuda::PrefillKernel::kWgmma);
  for (const auto& [kname, kernel] : kernels)
    for (int depth : {0, 32768})
      for (int window : {0, 128}) {
        const auto fn = [kernel](const ops::AttentionArgs& a) { return cuda::attention_prefill(*bench::ctx().cuda(), a, kernel); };
        const double us = time_attention_chunk(2048, depth, window, fn, depth ? 5 : 20);
        const double f = attention_flops(2048, depth, window);
        std::printf("| %s T=2048 d%d %s | %9.1f | %7.2f | %6.1f |\n", kname, depth,
                    window ? "window 128" : "full", us, f / 1e9, f / us / 1e6);
      }
  const double us = time_attention_chunk(  // the kernel prefill replaced
      2048, 0, 0, [](const ops::AttentionArgs& a) { return cuda::attention_decode(*bench::ctx().cuda(), a); }, 3);
  std::printf("| bf16_attention_decode T=2048 d0 full | %9.1f | %7.2f | %6.1f |\n", us,
              attention_flops(2048, 0, 0) / 1e9,
              attention_flops(2048, 0, 0) / us / 1e6);
  // kAttentionPrefillMinTokensPerSeq (heuristics.h): both kernels at small T on a 4096-token prefix.
  const char* prefill = cuda::attention_prefill_wgmma_available() ? "sm90_bf16_attention_prefill"
                                                                   : "bf16_attention_prefill";
  std::printf("\n| T at depth 4096 (full / window 128) | bf16_attention_decode us | %s us "
              "| bf16_attention_decode us (w) | %s us (w) |\n|---|---|---|---|---|\n",
              prefill, prefill);
  for (int T : {2, 4, 8, 12, 16, 24, 32, 64, 96, 128}) {
    double r[4];
    for (int i = 0; i < 4; ++i)
      r[i] = time_attention_chunk(T, 4096, i < 2 ? 0 : 128, [i](const ops::AttentionArgs& a) {
        return i % 2 ? cuda::attention_prefill(*bench::ctx().cuda(), a) : cuda::attention_decode(*bench::ctx().cuda(), a);
      }, 50);
    std::printf("| T=%d | %8.1f | %8.1f | %8.1f | %8.1f |\n", T, r[0], r[1], r[2], r[3]);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const bool attention_only = argc > 1 && std::string(argv[1]) == "attention";
  const bool prefill_only = argc > 1 && std::string(argv[1]) == "prefill";
  const bool moe_only = argc > 1 && std::string(argv[1]) == "moe";
  if (!ops::cuda_available()) {
    std::printf("bench_kernels: no CUDA device\n");
    return 0;
  }
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  bench_copy();
  std::printf("device: %s, copy bandwidth (read+write): %.0f GB/s\n\n", prop.name, g_copy_gbs);
  if (prefill_only) {
    bench_attention_prefill();
    return 0;
  }
  if (moe_only) {
    std::printf("| kernel (batch 1) | us/call | MB/call | GB/s | of copy |\n|---|---|---|---|---|\n");
    bench_moe();
    return 0;
  }
  std::printf("| kernel (batch 1) | us/call | MB/call | GB/s | of copy |\n|---|---|---|---|---|\n");
  if (!attention_only) {
    bench_moe();
    bench_linear("bf16_bf16w_gemv qkv 5120x2880 T=1", 1, 5120, 2880, 8, DType::BF16);
    bench_linear("bf16_bf16w_gemv o 2880x4096 T=1", 1, 2880, 4096, 8, DType::BF16);
    bench_linear("bf16_bf16w_gemv lm_head 201088x2880 T=1 f32", 1, 201088, 2880, 1, DType::F32);
    for (int T : {2, 4, 5, 8}) {
      char name[64];
      // heuristics::kLinearGemvMaxTokens picks the path: the GEMV, else cuBLASLt (bf16_bf16w_gemm.cu).
      std::snprintf(name, sizeof name, "%s qkv T=%d",
                    T <= heuristics::kLinearGemvMaxTokens ? "bf16_bf16w_gemv" : "bf16_bf16w_gemm (cuBLASLt)", T);
      bench_linear(name, T, 5120, 2880, 8, DType::BF16);
    }
  }
  for (int depth : {0, 4096, 32768}) bench_attention(depth, 0);
  bench_attention(4096, 128);  // a sliding-window layer
  for (int depth : {4096, 32768}) bench_attention(depth, 0, true);  // --kv-cache-dtype fp8
  if (!attention_only) bench_attention_prefill();
  return 0;
}
