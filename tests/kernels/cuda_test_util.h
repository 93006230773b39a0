// Helpers of the CUDA kernel tests (tests/kernels/cuda_*_test.cpp): the same values on the CPU
// (f32 activations, the reference backend) and on the GPU (bf16 activations), downloads, the
// routes a call took (the path a test pins), and the skip when no CUDA device is present.
#pragma once

#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "kernels/heuristics.h"
#include "kernels/ops.h"
#include "test_context.h"
#include "test_util.h"
#ifdef MXSERVE_HAVE_CUDA
#include "kernels/cuda/cuda_ops.h"
#endif

// GPU tests skip, visibly, on machines without a CUDA device (CI builds them but has no GPU).
#define MX_REQUIRE_CUDA() \
  if (!::mx::ops::cuda_available()) GTEST_SKIP() << "no CUDA device"

namespace mx::test {

// One tensor held twice: `cpu` for the reference backend, `gpu` for the CUDA backend.
struct Mirror {
  std::vector<uint8_t> host;
  ops::Buffer dev;
  Tensor cpu, gpu;
};

inline void fill_mirror(Mirror& m, DType cpu_type, DType gpu_type, std::initializer_list<int64_t> shape,
                        const void* gpu_bytes) {
  m.cpu = Tensor(m.host.data(), cpu_type, shape, Device::CPU);
  Tensor probe(nullptr, gpu_type, shape, Device::CUDA);
  m.dev = std::move(ops::Buffer::allocate(Device::CUDA, probe.nbytes()).value());
  m.gpu = m.dev.view(gpu_type, shape);
  Tensor src(const_cast<void*>(gpu_bytes), gpu_type, shape, Device::CPU);
  EXPECT_TRUE(ops::copy(m.gpu, src).ok());
}

// Activations: f32 on the CPU, bf16 on the GPU, both holding the bf16-rounded values of `v`.
inline Mirror act(const std::vector<float>& v, std::initializer_list<int64_t> shape) {
  Mirror m;
  m.host.resize(v.size() * 4);
  std::vector<bf16> b(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    b[i] = f32_to_bf16(v[i]);
    const float r = bf16_to_f32(b[i]);
    std::memcpy(m.host.data() + 4 * i, &r, 4);
  }
  fill_mirror(m, DType::F32, DType::BF16, shape, b.data());
  return m;
}

// Same dtype on both sides: bf16 weights (rounded from v), f32, i32 or u8 data.
inline Mirror bf16_weights(const std::vector<float>& v, std::initializer_list<int64_t> shape) {
  Mirror m;
  m.host.resize(v.size() * 2);
  for (size_t i = 0; i < v.size(); ++i) {
    const bf16 b = f32_to_bf16(v[i]);
    std::memcpy(m.host.data() + 2 * i, &b, 2);
  }
  fill_mirror(m, DType::BF16, DType::BF16, shape, m.host.data());
  return m;
}

template <typename T>
inline Mirror raw(const std::vector<T>& v, DType dtype, std::initializer_list<int64_t> shape) {
  Mirror m;
  m.host.resize(v.size() * sizeof(T));
  std::memcpy(m.host.data(), v.data(), m.host.size());
  fill_mirror(m, dtype, dtype, shape, m.host.data());
  return m;
}

// A GPU tensor (bf16 or f32) as floats.
inline std::vector<float> download(const Tensor& t) {
  std::vector<float> out(size_t(t.numel()));
  if (t.dtype == DType::F32) {
    EXPECT_TRUE(ops::copy(Tensor(out.data(), DType::F32, {t.numel()}), t).ok());
    return out;
  }
  std::vector<bf16> b(out.size());
  EXPECT_TRUE(ops::copy(Tensor(b.data(), DType::BF16, {t.numel()}), t).ok());
  for (size_t i = 0; i < b.size(); ++i) out[i] = bf16_to_f32(b[i]);
  return out;
}

inline std::vector<float> host_floats(const Mirror& m) {
  std::vector<float> out(size_t(m.cpu.numel()));
  std::memcpy(out.data(), m.host.data(), out.size() * 4);
  return out;
}

// Microseconds per call of `call` replayed inside a CUDA graph (launch gaps removed, as in a decode
// step): one graph of `per_graph` calls (call(i) for i = 0..per_graph-1), replayed `replays` times.
inline double graph_us_per_call(const std::function<Status(int)>& call, int per_graph, int replays) {
  for (int i = 0; i < per_graph; ++i) EXPECT_TRUE(call(i).ok());  // eager first: loads the kernels
  auto g = ops::StepGraph::capture(test::ctx(), [&]() -> Status {
    for (int i = 0; i < per_graph; ++i) MX_TRY(call(i));
    return ok_status();
  });
  EXPECT_TRUE(g.ok());
  if (!g.ok()) return 0.0;
  EXPECT_TRUE(g->replay().ok());
  EXPECT_TRUE(ops::synchronize(test::ctx()).ok());
  const auto t0 = std::chrono::steady_clock::now();
  for (int r = 0; r < replays; ++r) EXPECT_TRUE(g->replay().ok());
  EXPECT_TRUE(ops::synchronize(test::ctx()).ok());
  const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  return us / (double(replays) * per_graph);
}

// The CUDA routes a recorder saw (dispatch.cpp's names, "<op>:<kernel stem>", e.g.
// "linear:bf16_bf16w_gemv"), in call order: what a test compares with the path its case is meant to
// take. CPU routes ("<op>:cpu") are left out, so the reference calls may run under the same recorder.
inline std::vector<std::string> cuda_routes(const ops::RouteRecorder& rec) {
  std::vector<std::string> out;
  for (const std::string& r : rec.routes())
    if (!r.ends_with(":cpu")) out.push_back(r);
  return out;
}

// The grouped MoE family (its kernel stem) a call of T tokens x K over E experts runs under the test
// context's pin: heuristics::plan_moe_grouped's choice, or the pinned wgmma family (BF16 only).
inline std::string grouped_kernel(int64_t T, int64_t K, int64_t E, bool fp8 = false) {
  const heuristics::MoeGroupedPin pin = test::ctx().moe_grouped_pin();
  if (!fp8 && pin == heuristics::MoeGroupedPin::kWgmma) return "sm90_bf16_mxfp4w_moe_grouped";
  bool wgmma = false;
#ifdef MXSERVE_HAVE_CUDA
  wgmma = cuda::moe_grouped_wgmma_available();
#endif
  const heuristics::MoeGroupedPlan plan = heuristics::plan_moe_grouped(
      {.pairs = T * K, .experts = E, .fp8 = fp8, .offsets32 = true, .wgmma_available = wgmma, .pin = pin});
  return heuristics::moe_grouped_gemm_name(plan.gemm);
}

// The route ops::linear takes on CUDA: the GEMV up to heuristics.h's token bound where the GEMV's
// contract holds (rows of whole 16-byte chunks: Kin % 8 == 0, MXFP4 Kin % 32 == 0; 16-byte aligned
// tensors, as Mirror's are; x' staged in shared memory, which fits at the tests' sizes), else cuBLASLt.
struct LinearShape {
  int64_t T, Kin;
  bool mxfp4 = false;  // MXFP4 weights (--mxfp4-layers)
  bool norm = false;   // an input RMSNorm (LinearArgs::norm)
};
inline bool linear_takes_gemv(const LinearShape& s) {
  return s.mxfp4 ? s.T <= heuristics::kLinearMxfp4GemvMaxTokens && s.Kin % 32 == 0
                 : s.T <= heuristics::kLinearGemvMaxTokens && s.Kin % 8 == 0;
}
inline std::string linear_route(const LinearShape& s) {
  const std::string kernel = !linear_takes_gemv(s) ? (s.mxfp4 ? "mxfp4_rows_to_bf16+bf16_bf16w_gemm" : "bf16_bf16w_gemm")
                             : !s.mxfp4         ? "bf16_bf16w_gemv"
                             : s.T == 1         ? "bf16_mxfp4w_gemv"
                                                : "bf16_mxfp4w_gemv_mma";
  return std::string(s.norm ? "rmsnorm+linear:" : "linear:") + kernel;
}

// A dense weight (N, K) quantized to MXFP4 (core/dtype.h quantize_mxfp4_block, the loader's rule),
// the same bytes on both backends: blocks (N, K/2) u8 and scales (N, K/32) u8.
struct Mxfp4Mirror {
  Mirror blocks, scales;
};
inline Mxfp4Mirror mxfp4_weights(const std::vector<float>& v, int64_t N, int64_t K) {
  std::vector<uint8_t> blocks(size_t(N * K / 2)), scales(size_t(N * K / 32));
  for (int64_t b = 0; b < N * K / 32; ++b)
    EXPECT_TRUE(quantize_mxfp4_block(&v[size_t(b * 32)], &blocks[size_t(b * 16)], &scales[size_t(b)]));
  return {raw(blocks, DType::U8, {N, K / 2}), raw(scales, DType::U8, {N, K / 32})};
}

// Every 10th element scaled by 1.1: an NMSE near 1e-3, what a broken row or lane looks like.
inline std::vector<float> corrupted(std::vector<float> v) {
  for (size_t i = 0; i < v.size(); i += 10) v[i] *= 1.1f;
  return v;
}

}  // namespace mx::test
