// The fixtures' per-layer check (tests/fixtures/models/README.md, `prompt_hidden`): the residual
// stream of one prefill over the prompt at every layer boundary, on the model's device, and its
// comparison with transformers', naming the first boundary off. Used by the CPU fixture test (fp32,
// max relative error) and the CUDA one (BF16 activations, NMSE).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <numeric>
#include <span>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "model/forward.h"
#include "runtime/kv_cache.h"
#include "test_context.h"

namespace mx::test {

// One prefill of `prompt` through the forward's aux capture (model/forward.h), every boundary
// asked for: (T, (L+1)·D) floats, block j of a row = after j layers (0: the embedding).
inline std::vector<float> prompt_residuals(const Model& m, const std::vector<int32_t>& prompt) {
  const ModelConfig& c = m.config;
  const Device dev = m.weights.device;
  const int T = int(prompt.size()), L = c.num_hidden_layers, B = 16, blocks = (T + B - 1) / B;
  auto kv = KvCache::create(c, dev, blocks + 1, B);
  auto ws = Workspace::create(c, dev, T, 1);
  EXPECT_TRUE(kv.ok() && ws.ok());
  if (!kv.ok() || !ws.ok()) return {};
  std::vector<int32_t> positions(prompt.size()), seq(prompt.size(), 0), table(static_cast<size_t>(blocks));
  std::iota(positions.begin(), positions.end(), 0);
  std::iota(table.begin(), table.end(), 1);
  std::vector<int> boundaries(size_t(L) + 1);
  std::iota(boundaries.begin(), boundaries.end(), 0);
  const int64_t width = int64_t(L + 1) * c.hidden_size;
  // The inputs on the model's device (copies on CUDA), and the aux buffer in its activation dtype.
  std::vector<ops::Buffer> storage;
  const auto on_device = [&](std::vector<int32_t>& v, std::initializer_list<int64_t> shape) -> Tensor {
    const Tensor host(v.data(), DType::I32, shape);
    if (dev == Device::CPU) return host;
    storage.push_back(std::move(ops::Buffer::allocate(dev, std::max<size_t>(host.nbytes(), 4)).value()));
    const Tensor t = storage.back().view(DType::I32, shape);
    EXPECT_TRUE(ops::copy(t, host).ok());
    return t;
  };
  std::vector<int32_t> tokens(prompt), no_rows;
  const Tensor aux_probe(nullptr, ops::act_dtype(dev), {T, width}, dev);
  storage.push_back(std::move(ops::Buffer::allocate(dev, aux_probe.nbytes()).value()));
  const Tensor aux = storage.back().view(ops::act_dtype(dev), {T, width});
  const ForwardArgs fa{.tokens = on_device(tokens, {T}),
                       .batch = {.positions = on_device(positions, {T}),
                                 .seq_index = on_device(seq, {T}),
                                 .block_tables = on_device(table, {1, blocks})},
                       .cache = kv->layers(),
                       .logit_rows = on_device(no_rows, {0}),
                       .aux_boundaries = boundaries,
                       .aux = aux};
  const Status st = forward(ctx(), m, *ws, fa);
  EXPECT_TRUE(st.ok()) << st.message();
  EXPECT_TRUE(ops::synchronize(ctx()).ok());
  if (!st.ok()) return {};
  std::vector<float> out(size_t(T * width));
  if (aux.dtype == DType::F32) {
    EXPECT_TRUE(ops::copy(Tensor(out.data(), DType::F32, {T, width}), aux).ok());
    return out;
  }
  std::vector<bf16> b(out.size());
  EXPECT_TRUE(ops::copy(Tensor(b.data(), DType::BF16, {T, width}), aux).ok());
  for (size_t i = 0; i < b.size(); ++i) out[i] = bf16_to_f32(b[i]);
  return out;
}

// Each boundary's error under `metric` and the first boundary above `tolerance` (-1: none), with
// its worst value in words.
struct LayerErrors {
  std::vector<double> error;  // (L+1)
  int first_bad = -1;
  std::string detail;
};

// Boundary j is the output of the embedding (0) or of layer j-1.
inline std::string boundary_name(int j) {
  return j < 0 ? "none" : j == 0 ? "the embedding" : "layer " + std::to_string(j - 1);
}

using ErrorMetric = std::function<double(std::span<const float>, std::span<const float>)>;

// got (T, (L+1)·D) from prompt_residuals, want (L+1, T, D) the fixture's prompt_hidden.
inline LayerErrors compare_residuals(const std::vector<float>& got, const std::vector<float>& want, size_t T,
                                     size_t D, const ErrorMetric& metric, double tolerance, const char* metric_name) {
  LayerErrors r;
  const size_t boundaries = want.size() / (T * D);
  for (size_t j = 0; j < boundaries; ++j) {
    std::vector<float> slab(T * D);
    for (size_t t = 0; t < T; ++t)
      std::copy_n(got.begin() + ptrdiff_t((t * boundaries + j) * D), D, slab.begin() + ptrdiff_t(t * D));
    const std::span<const float> ref(want.data() + j * T * D, T * D);
    r.error.push_back(metric(slab, ref));
    if (r.first_bad >= 0 || r.error.back() <= tolerance) continue;
    r.first_bad = int(j);
    size_t worst = 0;
    for (size_t i = 0; i < slab.size(); ++i)
      if (std::abs(slab[i] - ref[i]) > std::abs(slab[worst] - ref[worst])) worst = i;
    char buf[200];
    std::snprintf(buf, sizeof buf, "%s %.2e > %.0e, worst at token %zu, dim %zu: got %.7g, want %.7g", metric_name,
                  r.error.back(), tolerance, worst / D, worst % D, double(slab[worst]), double(ref[worst]));
    r.detail = buf;
  }
  return r;
}

}  // namespace mx::test
