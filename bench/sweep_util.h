// sweep_util.h: what the sweeps of bench_sweeps share: device tensors made from seeded host values
// (the CUDA kernel tests' inputs: bf16 activations and weights, MXFP4 weights quantized by the
// loader's rule) and microseconds per call of ops replayed in a CUDA graph. Errors print and exit
// (benchmarks only; the library returns Status).
#pragma once

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "kernels/ops.h"
#include "bench_context.h"

namespace mx::bench {

inline void must(const Status& s) {
  if (!s.ok()) {
    std::fprintf(stderr, "error: %s\n", s.message().c_str());
    std::exit(1);
  }
}
template <typename T>
T must(Result<T> r) {
  must(r.status());
  return std::move(r).value();
}

// n uniform floats in [lo, hi) from a seeded mt19937_64 (the values of the tests' random_floats).
inline std::vector<float> random_floats(size_t n, uint64_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// A device tensor and its storage.
struct GpuTensor {
  ops::Buffer dev;
  Tensor gpu;
};

inline GpuTensor upload(const void* bytes, DType dtype, std::initializer_list<int64_t> shape) {
  GpuTensor m;
  const Tensor probe(nullptr, dtype, shape, Device::CUDA);
  m.dev = must(ops::Buffer::allocate(Device::CUDA, probe.nbytes()));
  m.gpu = m.dev.view(dtype, shape);
  must(ops::copy(m.gpu, Tensor(const_cast<void*>(bytes), dtype, shape, Device::CPU)));
  return m;
}

// The bf16-rounded values of v (activations and weights alike).
inline GpuTensor bf16_tensor(const std::vector<float>& v, std::initializer_list<int64_t> shape) {
  std::vector<bf16> b(v.size());
  for (size_t i = 0; i < v.size(); ++i) b[i] = f32_to_bf16(v[i]);
  return upload(b.data(), DType::BF16, shape);
}

// f32, i32 or u8 data as it is.
template <typename T>
GpuTensor raw(const std::vector<T>& v, DType dtype, std::initializer_list<int64_t> shape) {
  return upload(v.data(), dtype, shape);
}

// A dense weight (N, K) quantized to MXFP4 (core/dtype.h quantize_mxfp4_block): blocks (N, K/2) u8
// and scales (N, K/32) u8.
struct Mxfp4Gpu {
  GpuTensor blocks, scales;
};
inline Mxfp4Gpu mxfp4_weights(const std::vector<float>& v, int64_t N, int64_t K) {
  std::vector<uint8_t> blocks(size_t(N * K / 2)), scales(size_t(N * K / 32));
  for (int64_t b = 0; b < N * K / 32; ++b)
    if (!quantize_mxfp4_block(&v[size_t(b * 32)], &blocks[size_t(b * 16)], &scales[size_t(b)]))
      must(MX_ERROR("block {} of the weight is not finite", b));
  return {raw(blocks, DType::U8, {N, K / 2}), raw(scales, DType::U8, {N, K / 32})};
}

// Microseconds per call of `call` replayed inside a CUDA graph (launch gaps removed, as in a decode
// step): one graph of `per_graph` calls (call(i) for i = 0..per_graph-1), replayed `replays` times.
inline double graph_us_per_call(const std::function<Status(int)>& call, int per_graph, int replays,
                                ops::Context& cx = ctx()) {
  for (int i = 0; i < per_graph; ++i) must(call(i));  // eager first: loads the kernels, picks cuBLASLt's algorithms
  ops::StepGraph g = must(ops::StepGraph::capture(cx, [&]() -> Status {
    for (int i = 0; i < per_graph; ++i) MX_TRY(call(i));
    return ok_status();
  }));
  must(g.replay());
  must(ops::synchronize(cx));
  const auto t0 = std::chrono::steady_clock::now();
  for (int r = 0; r < replays; ++r) must(g.replay());
  must(ops::synchronize(cx));
  const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  return us / (double(replays) * per_graph);
}

}  // namespace mx::bench
