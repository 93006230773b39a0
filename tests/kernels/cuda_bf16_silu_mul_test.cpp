// CUDA silu_mul (bf16_silu_mul: 16-byte path for I % 8 == 0, scalar path otherwise) against the CPU
// reference on the same seeded bf16-rounded inputs, at the EAGLE-3 draft's widths and odd ones.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "cuda_test_util.h"
#include "test_context.h"

namespace mx::test {
namespace {

// The GPU rounds the FP32 result once to BF16: at most half an ulp of 8 significant bits, 2^-8
// relative; the FP32 exp and division of the two backends differ by a few FP32 ulps (~1e-7).
constexpr double kSiluMulRtol = 4e-3;

struct SiluMulRun {
  std::vector<float> gpu, cpu, gate_up;  // (T, I), (T, I), (T, 2I) the inputs as both backends see them
  int64_t I = 0;
};

// One silu_mul on both backends. `offset` elements in front of gate_up and out in their buffers
// (1 makes both 2 bytes off 16-byte alignment on the GPU: the scalar path even for I % 8 == 0).
SiluMulRun run_silu_mul(int64_t T, int64_t I, int64_t offset, uint64_t seed) {
  const int64_t n_in = T * 2 * I, n_out = T * I;
  // Gates over [-10, 10]: silu's negative dip, its near-zero tail and its near-identity side.
  Mirror gate_up = act(random_floats(size_t(offset + n_in), seed, -10.0f, 10.0f), {offset + n_in});
  Mirror out = act(random_floats(size_t(offset + n_out), seed + 1), {offset + n_out});
  const auto view = [&](const Mirror& m, Device d, std::initializer_list<int64_t> shape) {
    const Tensor& whole = d == Device::CPU ? m.cpu : m.gpu;
    const size_t elem = d == Device::CPU ? 4 : 2;
    return Tensor(static_cast<char*>(whole.data) + size_t(offset) * elem, whole.dtype, shape, d);
  };
  for (const Device d : {Device::CUDA, Device::CPU}) {
    const Status st = ops::silu_mul(test::ctx(), {.gate_up = view(gate_up, d, {T, 2 * I}), .out = view(out, d, {T, I})});
    EXPECT_TRUE(st.ok()) << st.message();
  }
  const std::vector<float> in = host_floats(gate_up), gpu = download(out.gpu), cpu = host_floats(out);
  return {.gpu = {gpu.begin() + offset, gpu.end()},
          .cpu = {cpu.begin() + offset, cpu.end()},
          .gate_up = {in.begin() + offset, in.end()},
          .I = I};
}

// Every |got - ref| <= kSiluMulRtol·|ref|; the first failure reports its token, column, inputs and
// both values.
::testing::AssertionResult matches_reference(const std::vector<float>& got, const SiluMulRun& r) {
  if (got.size() != r.cpu.size())
    return ::testing::AssertionFailure() << "size " << got.size() << " != " << r.cpu.size();
  for (size_t k = 0; k < got.size(); ++k) {
    if (std::abs(double(got[k]) - r.cpu[k]) <= kSiluMulRtol * std::abs(double(r.cpu[k]))) continue;
    const size_t t = k / size_t(r.I), i = k % size_t(r.I), row = t * 2 * size_t(r.I);
    return ::testing::AssertionFailure() << "t " << t << " i " << i << ": gate " << r.gate_up[row + i] << " up "
                                         << r.gate_up[row + size_t(r.I) + i] << " got " << got[k] << " ref "
                                         << r.cpu[k];
  }
  return ::testing::AssertionSuccess();
}

TEST(CudaBf16SiluMul, MatchesReference) {
  MX_REQUIRE_CUDA();
  uint64_t seed = 500;
  for (const int64_t T : {1, 3, 64})
    for (const int64_t I : {8, 17, 2880, 17280}) {  // 17: the scalar path; 2880, 17280: 16-byte loads
      const SiluMulRun r = run_silu_mul(T, I, 0, seed += 10);
      EXPECT_TRUE(matches_reference(r.gpu, r)) << "T=" << T << " I=" << I;
    }
}

TEST(CudaBf16SiluMul, UnalignedTensorsTakeTheScalarPath) {
  MX_REQUIRE_CUDA();
  for (const int64_t T : {1, 3}) {
    const SiluMulRun r = run_silu_mul(T, 2880, 1, 700 + uint64_t(T));
    EXPECT_TRUE(matches_reference(r.gpu, r)) << "T=" << T;
  }
}

TEST(CudaBf16SiluMul, ComparisonCatchesCorruptedOutput) {
  MX_REQUIRE_CUDA();
  const SiluMulRun r = run_silu_mul(3, 2880, 0, 9);
  EXPECT_TRUE(matches_reference(r.gpu, r));
  EXPECT_FALSE(matches_reference(corrupted(r.gpu), r)) << "the check must catch a corrupted output";
  std::vector<float> swapped = r.gpu;  // silu(up)·gate: the halves read the wrong way round
  for (size_t k = 0; k < swapped.size(); ++k) {
    const size_t row = k / size_t(r.I) * 2 * size_t(r.I), i = k % size_t(r.I);
    const float g = r.gate_up[row + size_t(r.I) + i], u = r.gate_up[row + i];
    swapped[k] = bf16_to_f32(f32_to_bf16(g / (1.0f + std::exp(-g)) * u));
  }
  EXPECT_FALSE(matches_reference(swapped, r)) << "the check must catch gate and up swapped";
}

}  // namespace
}  // namespace mx::test
