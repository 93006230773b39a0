// Op dispatch: validates each op's contract (shapes, dtypes, one device for all tensors), then
// routes to the CPU reference or the CUDA kernels by where the tensors live. All backend/path
// decisions are made here; MXSERVE_PRINT_DISPATCH=1 prints each one, ops::RouteRecorder records
// them (tests).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "core/log.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/collective.h"
#include "kernels/heuristics.h"
#include "kernels/ops.h"
#ifdef MXSERVE_HAVE_CUDA
#include "kernels/cuda/backend.h"
#include "kernels/cuda/cuda_ops.h"
#endif

namespace mx::ops {
namespace {

bool print_dispatch() {
  static const bool on = [] {
    const char* e = std::getenv("MXSERVE_PRINT_DISPATCH");
    return e && *e && *e != '0';
  }();
  return on;
}

using namespace heuristics;

Status expect(const Tensor& t, const char* op, const char* name, std::initializer_list<DType> dtypes, int ndim,
              Device device) {
  MX_CHECK(!t.empty(), "{}: tensor '{}' is missing", op, name);
  MX_CHECK(t.ndim == ndim, "{}: tensor '{}' has {} dims {}, expected {}", op, name, t.ndim, t.shape_str(), ndim);
  MX_CHECK(t.device == device, "{}: tensor '{}' is on another device than the op's input", op, name);
  bool dtype_ok = false;
  for (DType d : dtypes) dtype_ok |= t.dtype == d;
  MX_CHECK(dtype_ok, "{}: tensor '{}' has dtype {}", op, name, dtype_name(t.dtype));
  return ok_status();
}

Status same_dim(const char* op, const char* what, int64_t a, int64_t b) {
  MX_CHECK(a == b, "{}: {} mismatch ({} vs {})", op, what, a, b);
  return ok_status();
}

// A route's name in the profile and the route recorder: "<op>:<kernel>" on CUDA, the kernel being
// the stem of the one that runs (kernels/cuda/<stem>.cu, its __global__ and launcher; two joined by
// '+' where the op launches both), "<op>:cpu" on the CPU reference.
struct RouteName {
  const char* op;
  const char* kernel;
};

// Calls the backend of `device` for an op; CUDA ops exist only in CUDA builds and run on the
// context's cuda::Backend. `bytes` is what the op reads and writes at least (for the profile's
// GB/s); while the context profiles, CUDA ops are bracketed by device events (read at take_profile).
template <typename Args, typename CpuFn, typename CudaFn>
Status route(Context& cx, RouteName route_name, Device device, const Args& a, CpuFn cpu_fn,
             [[maybe_unused]] CudaFn cuda_fn, double bytes = 0) {
  const auto name = [&] {
    return std::string(route_name.op) + ":" + (device == Device::CPU ? "cpu" : route_name.kernel);
  };
  if (print_dispatch()) log_info("dispatch {}", name());
  if (cx.routes) cx.routes->push_back(name());
  if (device == Device::CPU) {
    if (!cx.profiling()) return cpu_fn(a);
    const auto t0 = std::chrono::steady_clock::now();
    Status st = cpu_fn(a);
    const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    cx.add_timing({name(), bytes, nullptr, nullptr, us});
    return st;
  }
#ifdef MXSERVE_HAVE_CUDA
  MX_ASSIGN(cuda::Backend* const b, cx.cuda_for(route_name.op));
  if (!cx.profiling()) return cuda_fn(*b, a);
  void* start = cuda::event_record(*b);
  Status st = cuda_fn(*b, a);
  cx.add_timing({name(), bytes, start, cuda::event_record(*b), 0});
  return st;
#else
  return MX_ERROR("{}: tensors are on a CUDA device but mxserve was built without CUDA", route_name.op);
#endif
}

double nbytes(std::initializer_list<const Tensor*> ts) {
  double b = 0;
  for (const Tensor* t : ts)
    if (!t->empty()) b += double(t->nbytes());
  return b;
}

#ifdef MXSERVE_HAVE_CUDA
#define MX_CUDA_FN(name) [](cuda::Backend& b, const auto& args) { return cuda::name(b, args); }
#else
#define MX_CUDA_FN(name) [](auto&, const auto&) { return ok_status(); }
#endif

}  // namespace

namespace {
// A dense weight of `op` (ops.h: BF16, or MXFP4 blocks + scales) with Kin input features.
Status check_dense_weight(const char* op, const Tensor& w, const Tensor& scales, int64_t Kin, Device dev) {
  if (!is_mxfp4(scales)) {
    MX_TRY(expect(w, op, "w", {DType::BF16}, 2, dev));
    return same_dim(op, "input features", Kin, w.dim(1));
  }
  MX_TRY(expect(w, op, "w (MXFP4 blocks)", {DType::U8}, 2, dev));
  MX_TRY(expect(scales, op, "w scales", {DType::U8}, 2, dev));
  MX_CHECK(Kin % 32 == 0, "{}: MXFP4 weights need input features divisible by 32, got {}", op, Kin);
  MX_TRY(same_dim(op, "MXFP4 block bytes per row", w.dim(1), Kin / 2));
  MX_TRY(same_dim(op, "MXFP4 scales per row", scales.dim(1), Kin / 32));
  return same_dim(op, "MXFP4 scale rows", scales.dim(0), w.dim(0));
}
}  // namespace

Status embed(Context& cx, const EmbedArgs& a) {
  const Device dev = a.out.device;
  MX_TRY(expect(a.ids, "embed", "ids", {DType::I32}, 1, dev));
  MX_TRY(check_dense_weight("embed", a.table, a.table_scales, a.out.dim(1), dev));
  MX_TRY(expect(a.out, "embed", "out", {act_dtype(dev)}, 2, dev));
  MX_TRY(same_dim("embed", "tokens", a.ids.dim(0), a.out.dim(0)));
  return route(cx, {"embed", is_mxfp4(a.table_scales) ? "mxfp4_rows_to_bf16" : "bf16_gather_rows"}, dev, a, cpu::embed, MX_CUDA_FN(embed),
               2 * nbytes({&a.out}));
}

Status rmsnorm(Context& cx, const RmsNormArgs& a) {
  const Device dev = a.out.device;
  MX_TRY(expect(a.x, "rmsnorm", "x", {act_dtype(dev)}, 2, dev));
  MX_TRY(expect(a.weight, "rmsnorm", "weight", {DType::BF16, DType::F32}, 1, dev));
  MX_TRY(expect(a.out, "rmsnorm", "out", {act_dtype(dev)}, 2, dev));
  MX_TRY(same_dim("rmsnorm", "hidden size", a.x.dim(1), a.weight.dim(0)));
  MX_TRY(same_dim("rmsnorm", "tokens", a.x.dim(0), a.out.dim(0)));
  return route(cx, {"rmsnorm", "bf16_bf16w_rmsnorm"}, dev, a, cpu::rmsnorm, MX_CUDA_FN(rmsnorm), nbytes({&a.x, &a.weight, &a.out}));
}

namespace {
Status check_linear(const LinearArgs& a) {
  const Device dev = a.out.device;
  MX_TRY(expect(a.x, "linear", "x", {act_dtype(dev)}, 2, dev));
  MX_TRY(check_dense_weight("linear", a.w, a.w_scales, a.x.dim(1), dev));
  MX_TRY(expect(a.out, "linear", "out", {act_dtype(dev), DType::F32}, 2, dev));
  if (!a.bias.empty()) {
    MX_TRY(expect(a.bias, "linear", "bias", {DType::BF16}, 1, dev));
    MX_TRY(same_dim("linear", "bias length", a.bias.dim(0), a.w.dim(0)));
  }
  MX_TRY(same_dim("linear", "output features", a.out.dim(1), a.w.dim(0)));
  MX_TRY(same_dim("linear", "tokens", a.x.dim(0), a.out.dim(0)));
  if (!a.norm.weight.empty()) {
    MX_TRY(expect(a.norm.weight, "linear", "norm weight", {DType::BF16, DType::F32}, 1, dev));
    MX_TRY(same_dim("linear", "norm weight length", a.norm.weight.dim(0), a.x.dim(1)));
    MX_CHECK(a.out.data != a.x.data, "linear: out must not alias x with an input norm");
  }
  return ok_status();
}
}  // namespace

Status linear(Context& cx, const LinearArgs& a) {
  MX_TRY(check_linear(a));
  const Device dev = a.out.device;
  const char* op = a.norm.weight.empty() ? "linear" : "rmsnorm+linear";
  const double bytes = nbytes({&a.x, &a.w, &a.w_scales, &a.bias, &a.norm.weight, &a.out});
  if (dev == Device::CPU) return route(cx, {op, ""}, dev, a, cpu::linear, MX_CUDA_FN(linear_gemv), bytes);
#ifdef MXSERVE_HAVE_CUDA
  if (is_mxfp4(a.w_scales)) {
    if (a.x.dim(0) <= kLinearMxfp4GemvMaxTokens && cuda::linear_gemv_supported(a))
      return route(cx, {op, cuda::linear_gemv_kernel_name(a)}, dev, a, cpu::linear, MX_CUDA_FN(linear_gemv), bytes);
    return route(cx, {op, "mxfp4_rows_to_bf16+bf16_bf16w_gemm"}, dev, a, cpu::linear, MX_CUDA_FN(linear_gemm), bytes);
  }
  if (a.x.dim(0) <= kLinearGemvMaxTokens && cuda::linear_gemv_supported(a))
    return route(cx, {op, cuda::linear_gemv_kernel_name(a)}, dev, a, cpu::linear, MX_CUDA_FN(linear_gemv), bytes);
#endif
  return route(cx, {op, "bf16_bf16w_gemm"}, dev, a, cpu::linear, MX_CUDA_FN(linear_gemm), bytes);
}

Status gather_rows(Context& cx, const GatherRowsArgs& a) {
  const Device dev = a.out.device;
  MX_TRY(expect(a.x, "gather_rows", "x", {act_dtype(dev)}, 2, dev));
  MX_TRY(expect(a.rows, "gather_rows", "rows", {DType::I32}, 1, dev));
  MX_TRY(expect(a.out, "gather_rows", "out", {act_dtype(dev)}, 2, dev));
  MX_TRY(same_dim("gather_rows", "rows", a.rows.dim(0), a.out.dim(0)));
  MX_TRY(same_dim("gather_rows", "width", a.x.dim(1), a.out.dim(1)));
  return route(cx, {"gather_rows", "bf16_gather_rows"}, dev, a, cpu::gather_rows, MX_CUDA_FN(gather_rows), 2 * nbytes({&a.out}));
}

namespace {
// Whether two tensors share any byte (views of one buffer at different offsets included).
bool overlaps(const Tensor& a, const Tensor& b) {
  const auto a0 = reinterpret_cast<uintptr_t>(a.data), b0 = reinterpret_cast<uintptr_t>(b.data);
  return a.nbytes() > 0 && b.nbytes() > 0 && a0 < b0 + b.nbytes() && b0 < a0 + a.nbytes();
}
}  // namespace

Status silu_mul(Context& cx, const SiluMulArgs& a) {
  const Device dev = a.out.device;
  MX_TRY(expect(a.gate_up, "silu_mul", "gate_up", {act_dtype(dev)}, 2, dev));
  MX_TRY(expect(a.out, "silu_mul", "out", {act_dtype(dev)}, 2, dev));
  MX_TRY(same_dim("silu_mul", "tokens", a.gate_up.dim(0), a.out.dim(0)));
  MX_TRY(same_dim("silu_mul", "gate_up width (2 x out width)", a.gate_up.dim(1), 2 * a.out.dim(1)));
  MX_CHECK(!overlaps(a.out, a.gate_up), "silu_mul: tensor 'out' overlaps 'gate_up' (it must not alias it)");
  return route(cx, {"silu_mul", "bf16_silu_mul"}, dev, a, cpu::silu_mul, MX_CUDA_FN(silu_mul), nbytes({&a.gate_up, &a.out}));
}

namespace {
Status check_batch_and_cache(const char* op, const TokenBatch& b, const KvLayer& c, const Tensor& qkv, int H, int Hkv,
                             int Dh, Device dev) {
  MX_TRY(expect(qkv, op, "qkv", {act_dtype(dev)}, 2, dev));
  MX_TRY(expect(b.positions, op, "positions", {DType::I32}, 1, dev));
  MX_TRY(expect(b.seq_index, op, "seq_index", {DType::I32}, 1, dev));
  MX_TRY(expect(b.block_tables, op, "block_tables", {DType::I32}, 2, dev));
  MX_TRY(expect(c.k, op, "k cache", {act_dtype(dev), DType::F8_E4M3}, 4, dev));
  MX_TRY(expect(c.v, op, "v cache", {c.k.dtype}, 4, dev));
  if (c.fp8()) {  // --kv-cache-dtype fp8: one K and one V scale per layer
    MX_TRY(expect(c.scales, op, "kv scales", {DType::F32}, 1, dev));
    MX_TRY(same_dim(op, "kv scales", c.scales.dim(0), 2));
  }
  MX_CHECK(H > 0 && Hkv > 0 && H % Hkv == 0 && Dh > 0 && Dh % 2 == 0, "{}: bad head layout H={} Hkv={} Dh={}", op,
           H, Hkv, Dh);
  MX_TRY(same_dim(op, "qkv width", qkv.dim(1), int64_t(H + 2 * Hkv) * Dh));
  MX_TRY(same_dim(op, "tokens", qkv.dim(0), b.positions.dim(0)));
  MX_TRY(same_dim(op, "tokens", qkv.dim(0), b.seq_index.dim(0)));
  MX_TRY(same_dim(op, "cache kv heads", c.k.dim(2), Hkv));
  MX_TRY(same_dim(op, "cache head dim", c.k.dim(3), Dh));
  return ok_status();
}

Status check_qkv_rope_cache(const QkvRopeCacheArgs& a) {
  const Device dev = a.qkv.device;
  MX_TRY(check_batch_and_cache("qkv_rope_cache", a.batch, a.cache, a.qkv, a.n_heads, a.n_kv_heads, a.head_dim, dev));
  MX_TRY(expect(a.rope.inv_freq, "qkv_rope_cache", "inv_freq", {DType::F32}, 1, dev));
  MX_TRY(same_dim("qkv_rope_cache", "rope frequencies", a.rope.inv_freq.dim(0), a.head_dim / 2));
  return ok_status();
}
}  // namespace

Status qkv_rope_cache(Context& cx, const QkvRopeCacheArgs& a) {
  MX_TRY(check_qkv_rope_cache(a));
  const Device dev = a.qkv.device;
  return route(cx, {"qkv_rope_cache", "bf16_qkv_rope_cache"}, dev, a, cpu::qkv_rope_cache, MX_CUDA_FN(qkv_rope_cache), 2 * nbytes({&a.qkv}));
}

Status kv_scales(Context& cx, const KvScalesArgs& a) {
  const Device dev = a.qkv.device;
  MX_TRY(expect(a.qkv, "kv_scales", "qkv", {act_dtype(dev)}, 2, dev));
  MX_TRY(expect(a.scales, "kv_scales", "scales", {DType::F32}, 1, dev));
  MX_TRY(same_dim("kv_scales", "scales", a.scales.dim(0), 2));
  MX_CHECK(a.n_heads > 0 && a.n_kv_heads > 0 && a.head_dim > 0 && a.head_dim % 2 == 0,
           "kv_scales: bad head layout H={} Hkv={} Dh={}", a.n_heads, a.n_kv_heads, a.head_dim);
  MX_TRY(same_dim("kv_scales", "qkv width", a.qkv.dim(1), int64_t(a.n_heads + 2 * a.n_kv_heads) * a.head_dim));
  return route(cx, {"kv_scales", "bf16_kv_scales"}, dev, a, cpu::kv_scales, MX_CUDA_FN(kv_scales), nbytes({&a.qkv}));
}

Status qkv_projection(Context& cx, const QkvProjectionArgs& a) {
  const LinearArgs lin{.x = a.x, .w = a.w, .bias = a.bias, .out = a.qkv, .norm = a.norm, .w_scales = a.w_scales};
  const QkvRopeCacheArgs rc{.qkv = a.qkv,
                            .n_heads = a.n_heads,
                            .n_kv_heads = a.n_kv_heads,
                            .head_dim = a.head_dim,
                            .rope = a.rope,
                            .batch = a.batch,
                            .cache = a.cache};
  MX_TRY(check_linear(lin));
  MX_TRY(check_qkv_rope_cache(rc));
  const Device dev = a.qkv.device;
  if (a.calibrate_kv) {  // an FP8 cache's first prefill: the scales from this call's k and v, then the writes
    MX_CHECK(a.cache.fp8(), "qkv_projection: calibrate_kv needs an FP8 cache");
    MX_TRY(linear(cx, lin));
    MX_TRY(kv_scales(cx, {.qkv = a.qkv, .n_heads = a.n_heads, .n_kv_heads = a.n_kv_heads, .head_dim = a.head_dim,
                      .concentration = a.rope.concentration, .scales = a.cache.scales}));
    return qkv_rope_cache(cx, rc);
  }
  const double bytes = nbytes({&a.x, &a.w, &a.w_scales, &a.bias, &a.norm.weight, &a.qkv, &a.qkv}) +
                       2.0 * double(a.qkv.dim(0)) * a.n_kv_heads * a.head_dim * dtype_size(a.qkv.dtype);
  if (dev == Device::CPU)
    return route(cx, {"qkv_projection", ""}, dev, a, cpu::qkv_projection, MX_CUDA_FN(qkv_projection_fused), bytes);
#ifdef MXSERVE_HAVE_CUDA
  const int64_t gemv_max = is_mxfp4(a.w_scales) ? kLinearMxfp4GemvMaxTokens : kLinearGemvMaxTokens;
  if (a.x.dim(0) <= gemv_max && cuda::qkv_projection_fused_supported(a))
    return route(cx, {"qkv_projection", cuda::qkv_projection_kernel_name(a)}, dev, a, cpu::qkv_projection,
                 MX_CUDA_FN(qkv_projection_fused), bytes);
#endif
  // The two ops in a row (each routed, and profiled, on its own).
  MX_TRY(linear(cx, lin));
  return qkv_rope_cache(cx, rc);
}

Status attention(Context& cx, const AttentionArgs& a) {
  const Device dev = a.out.device;
  MX_TRY(check_batch_and_cache("attention", a.batch, a.cache, a.qkv, a.n_heads, a.n_kv_heads, a.head_dim, dev));
  MX_TRY(expect(a.sinks, "attention", "sinks", {DType::BF16, DType::F32}, 1, dev));
  MX_TRY(expect(a.out, "attention", "out", {act_dtype(dev)}, 2, dev));
  MX_TRY(same_dim("attention", "sinks", a.sinks.dim(0), a.n_heads));
  MX_TRY(same_dim("attention", "out width", a.out.dim(1), int64_t(a.n_heads) * a.head_dim));
  MX_CHECK(a.window >= 0, "attention: negative window {}", a.window);
  // KV bytes depend on the positions (device data): the caller adds them (see runtime/bench).
  const double bytes = nbytes({&a.qkv, &a.out});
#ifdef MXSERVE_HAVE_CUDA
  if (dev == Device::CUDA && a.qkv.dim(0) >= kAttentionPrefillMinTokensPerSeq * a.batch.seqs() &&
      cuda::attention_prefill_supported(*cx.cuda(), a))
    return route(cx, {"attention", cuda::attention_prefill_kernel_name()}, dev, a, cpu::attention,
                 MX_CUDA_FN(attention_prefill), bytes);
#endif
  return route(cx, {"attention", "bf16_attention_decode"}, dev, a, cpu::attention, MX_CUDA_FN(attention_decode), bytes);
}

Status router_topk(Context& cx, const RouterTopkArgs& a) {
  const Device dev = a.ids.device;
  MX_TRY(expect(a.logits, "router_topk", "logits", {act_dtype(dev), DType::F32}, 2, dev));
  MX_TRY(expect(a.ids, "router_topk", "ids", {DType::I32}, 2, dev));
  MX_TRY(expect(a.weights, "router_topk", "weights", {DType::F32}, 2, dev));
  MX_CHECK(a.ids.dim(1) >= 1 && a.ids.dim(1) <= a.logits.dim(1), "router_topk: k={} with {} experts", a.ids.dim(1),
           a.logits.dim(1));
  MX_TRY(same_dim("router_topk", "tokens", a.logits.dim(0), a.ids.dim(0)));
  return route(cx, {"router_topk", "bf16_router_topk"}, dev, a, cpu::router_topk, MX_CUDA_FN(router_topk), nbytes({&a.logits, &a.ids, &a.weights}));
}

Status moe_router(Context& cx, const MoeRouterArgs& a) {
  const Device dev = a.x.device;
  MX_TRY(expect(a.x, "moe_router", "x", {act_dtype(dev)}, 2, dev));
  MX_TRY(expect(a.norm_weight, "moe_router", "norm weight", {DType::BF16, DType::F32}, 1, dev));
  MX_TRY(check_dense_weight("moe_router", a.w, a.w_scales, a.x.dim(1), dev));
  MX_TRY(expect(a.xn, "moe_router", "xn", {act_dtype(dev)}, 2, dev));
  MX_TRY(expect(a.logits, "moe_router", "logits", {act_dtype(dev), DType::F32}, 2, dev));
  const bool topk = !a.ids.empty() || !a.weights.empty();  // else: logits only
  if (topk) {
    MX_TRY(expect(a.ids, "moe_router", "ids", {DType::I32}, 2, dev));
    MX_TRY(expect(a.weights, "moe_router", "weights", {DType::F32}, 2, dev));
  }
  const int64_t T = a.x.dim(0), D = a.x.dim(1), E = a.w.dim(0), K = topk ? a.ids.dim(1) : 1;
  if (!a.bias.empty()) {
    MX_TRY(expect(a.bias, "moe_router", "bias", {DType::BF16}, 1, dev));
    MX_TRY(same_dim("moe_router", "bias length", a.bias.dim(0), E));
  }
  MX_TRY(same_dim("moe_router", "norm weight length", a.norm_weight.dim(0), D));
  MX_TRY(same_dim("moe_router", "xn width", a.xn.dim(1), D));
  MX_TRY(same_dim("moe_router", "experts", a.logits.dim(1), E));
  if (topk) {
    MX_TRY(same_dim("moe_router", "weights width", a.weights.dim(1), K));
    for (const Tensor* t : {&a.ids, &a.weights}) MX_TRY(same_dim("moe_router", "tokens", t->dim(0), T));
  }
  for (const Tensor* t : {&a.xn, &a.logits}) MX_TRY(same_dim("moe_router", "tokens", t->dim(0), T));
  MX_CHECK(K >= 1 && K <= E, "moe_router: k={} with {} experts", K, E);
  MX_CHECK(a.xn.data != a.x.data, "moe_router: xn must not alias x");
  const double bytes =
      nbytes({&a.x, &a.norm_weight, &a.w, &a.w_scales, &a.bias, &a.xn, &a.logits, &a.ids, &a.weights});
  if (dev == Device::CPU) return route(cx, {"moe_router", ""}, dev, a, cpu::moe_router, MX_CUDA_FN(moe_router_fused), bytes);
  bool fused = false;
#ifdef MXSERVE_HAVE_CUDA
  fused = T <= kMoeRouterFusedMaxTokens && cuda::moe_router_fused_supported(a);
#endif
  if (fused) {  // norm + router GEMV in one kernel
    MoeRouterArgs logits_only = a;
    logits_only.ids = logits_only.weights = {};
    MX_TRY(route(cx, {"moe_router", "bf16_bf16w_norm_router"}, dev, logits_only, cpu::moe_router, MX_CUDA_FN(moe_router_fused), bytes));
  } else {  // the two ops in a row (each routed, and profiled, on its own)
    MX_TRY(rmsnorm(cx, {.x = a.x, .weight = a.norm_weight, .eps = a.eps, .out = a.xn}));
    MX_TRY(linear(cx, {.x = a.xn, .w = a.w, .bias = a.bias, .out = a.logits, .w_scales = a.w_scales}));
  }
  if (!topk) return ok_status();
  return router_topk(cx, {.logits = a.logits, .ids = a.ids, .weights = a.weights});
}

Status moe(Context& cx, const MoeArgs& a) {
  const Device dev = a.residual.device;
  MX_TRY(expect(a.x, "moe", "x", {act_dtype(dev)}, 2, dev));
  MX_TRY(expect(a.ids, "moe", "ids", {DType::I32}, 2, dev));
  MX_TRY(expect(a.weights, "moe", "weights", {DType::F32}, 2, dev));
  MX_TRY(expect(a.residual, "moe", "residual", {act_dtype(dev)}, 2, dev));
  MX_TRY(expect(a.w.gate_up_blocks, "moe", "gate_up_blocks", {DType::U8}, 4, dev));
  MX_TRY(expect(a.w.gate_up_scales, "moe", "gate_up_scales", {DType::U8}, 3, dev));
  MX_TRY(expect(a.w.gate_up_bias, "moe", "gate_up_bias", {DType::BF16}, 2, dev));
  MX_TRY(expect(a.w.down_blocks, "moe", "down_blocks", {DType::U8}, 4, dev));
  MX_TRY(expect(a.w.down_scales, "moe", "down_scales", {DType::U8}, 3, dev));
  MX_TRY(expect(a.w.down_bias, "moe", "down_bias", {DType::BF16}, 2, dev));
  const int64_t D = a.x.dim(1);
  MX_TRY(same_dim("moe", "gate_up input blocks", a.w.gate_up_blocks.dim(2) * 32, D));
  MX_TRY(same_dim("moe", "down output rows", a.w.down_blocks.dim(1), D));
  MX_TRY(same_dim("moe", "down input blocks", a.w.down_blocks.dim(2) * 32, a.w.gate_up_blocks.dim(1) / 2));
  MX_TRY(same_dim("moe", "tokens", a.x.dim(0), a.ids.dim(0)));
  MX_TRY(same_dim("moe", "residual width", a.residual.dim(1), D));
  MX_CHECK(a.weights.dim(0) == a.ids.dim(0) && a.weights.dim(1) == a.ids.dim(1), "moe: weights {} vs ids {}",
           a.weights.shape_str(), a.ids.shape_str());
  const int64_t T = a.x.dim(0);
  const bool from_logits = a.routing == MoeRouting::FromLogits;
  MX_CHECK(from_logits != a.logits.empty(), "moe: routing {} with{} router logits",
           from_logits ? "FromLogits" : "FromIds", a.logits.empty() ? "out" : "");
  if (from_logits) {
    MX_TRY(expect(a.logits, "moe", "logits", {act_dtype(dev), DType::F32}, 2, dev));
    MX_TRY(same_dim("moe", "logits tokens", a.logits.dim(0), T));
    MX_TRY(same_dim("moe", "logits width (experts)", a.logits.dim(1), a.w.gate_up_blocks.dim(0)));
    MX_CHECK(a.ids.dim(1) >= 1 && a.ids.dim(1) <= a.logits.dim(1), "moe: k={} with {} experts", a.ids.dim(1),
             a.logits.dim(1));
    // The CUDA GEMV kernels select in their prologue; elsewhere router_topk runs first.
    if (!moe_selects_from_logits(dev, T, a.logits.dim(1))) {
      MX_TRY(router_topk(cx, {.logits = a.logits, .ids = a.ids, .weights = a.weights}));
      MoeArgs b = a;
      b.routing = MoeRouting::FromIds;
      b.logits = {};
      return moe(cx, b);
    }
  }
  // At most min(E, T·K) distinct experts are read.
  const double E = double(a.w.gate_up_blocks.dim(0));
  const double experts_read = std::min(E, double(a.ids.numel()));
  const double expert_bytes = nbytes({&a.w.gate_up_blocks, &a.w.gate_up_scales, &a.w.gate_up_bias, &a.w.down_blocks,
                                      &a.w.down_scales, &a.w.down_bias}) / E;
  const double bytes = experts_read * expert_bytes + nbytes({&a.x, &a.residual, &a.residual});
  // The context's setting applies to the CUDA grouped path; the CPU reference honours an explicit one.
  MoeArgs b = a;
  if (b.activation == MoeActivation::Default)
    b.activation = dev == Device::CUDA ? cx.moe_activation() : MoeActivation::BF16;
  if (dev == Device::CUDA && T > kMoeGemvMaxTokens) {
#ifdef MXSERVE_HAVE_CUDA
    const heuristics::MoeGroupedPin pin = cx.moe_grouped_pin();
    const auto grouped = [pin](cuda::Backend& be, const MoeArgs& m) { return cuda::moe_grouped(be, m, pin); };
    return route(cx, {"moe", cuda::moe_grouped_kernel_name(b, pin)}, dev, b, cpu::moe, grouped, bytes);
#endif
  }
  if (dev == Device::CUDA) b.activation = MoeActivation::BF16;  // the decode GEMVs
  return route(cx, {"moe", "bf16_mxfp4w_moe_gemv"}, dev, b, cpu::moe, MX_CUDA_FN(moe), bytes);
}

bool moe_selects_from_logits(Device dev, int64_t T, int64_t E) {
#ifdef MXSERVE_HAVE_CUDA
  return dev == Device::CUDA && T <= kMoeGemvMaxTokens && cuda::moe_selects_supported(E);
#else
  (void)dev, (void)T, (void)E;
  return false;
#endif
}

std::optional<MoeActivation> parse_moe_activation(std::string_view name) {
  if (name == "bf16") return MoeActivation::BF16;
  if (name == "fp8") return MoeActivation::FP8;
  return std::nullopt;
}

Status fill_random(Context& cx, const FillRandomArgs& a) {
  const Device dev = a.out.device;
  MX_TRY(expect(a.out, "fill_random", "out", {DType::F32, DType::BF16, DType::U8}, a.out.ndim, dev));
  MX_CHECK(a.byte_lo >= 0 && a.byte_hi <= 255 && a.byte_lo <= a.byte_hi, "fill_random: byte range [{}, {}]",
           a.byte_lo, a.byte_hi);
  return route(cx, {"fill_random", "fill_random"}, dev, a, cpu::fill_random, MX_CUDA_FN(fill_random), nbytes({&a.out}));
}

Status sample(Context& cx, const SampleArgs& a) {
  const Device dev = a.ids.device;
  MX_TRY(expect(a.logits, "sample", "logits", {DType::F32}, 2, dev));
  MX_TRY(expect(a.params, "sample", "params", {DType::F32}, 2, dev));
  MX_TRY(expect(a.seeds, "sample", "seeds", {DType::I32}, 1, dev));
  MX_TRY(expect(a.positions, "sample", "positions", {DType::I32}, 1, dev));
  MX_TRY(expect(a.ids, "sample", "ids", {DType::I32}, 1, dev));
  const int64_t R = a.logits.dim(0);
  MX_TRY(same_dim("sample", "params rows", a.params.dim(0), R));
  MX_TRY(same_dim("sample", "params columns", a.params.dim(1), 4));
  MX_TRY(same_dim("sample", "seeds", a.seeds.dim(0), R));
  MX_TRY(same_dim("sample", "positions", a.positions.dim(0), R));
  MX_TRY(same_dim("sample", "ids", a.ids.dim(0), R));
  return route(cx, {"sample", "f32_sample"}, dev, a, cpu::sample, MX_CUDA_FN(sample), nbytes({&a.logits}));
}

namespace {
// Host data only (the CPU backend): offsets non-decreasing within [0, N], every entry of rows
// [0, R) a known kind with a token in [0, V). On CUDA these live on the device and are not read
// here: the kernels skip entries that fall outside.
Status check_host_entries(const char* op, const Tensor& offsets, const Tensor& entries, int64_t V) {
  const int32_t* off = offsets.ptr<const int32_t>();
  const int64_t R = offsets.dim(0) - 1, N = entries.dim(0);
  MX_CHECK(off[0] >= 0, "{}: offsets[0] = {} is negative", op, off[0]);
  for (int64_t r = 0; r < R; ++r)
    MX_CHECK(off[r] <= off[r + 1] && off[r + 1] <= N, "{}: offsets[{}] = {}, offsets[{}] = {} with {} entries", op,
             r, off[r], r + 1, off[r + 1], N);
  const auto* e = reinterpret_cast<const LogitsEntry*>(entries.data);
  for (int64_t r = 0; r < R; ++r)  // MaskOthers: token 0, then exactly `count` Mask entries in increasing token order
    for (int64_t i = off[r]; i < off[r + 1]; ++i) {
      if (e[i].kind != LogitsEntryKind::MaskOthers) continue;
      MX_CHECK(e[i].token == 0 && e[i].count >= 0 && i + 1 + e[i].count == off[r + 1],
               "{}: entry {} (mask others) must have token 0 and count the {} entries after it in its row", op, i,
               off[r + 1] - i - 1);
      for (int64_t j = i + 1; j < off[r + 1]; ++j)
        MX_CHECK(e[j].kind == LogitsEntryKind::Mask && (j == i + 1 || e[j].token > e[j - 1].token),
                 "{}: entry {} after a mask-others entry must be a mask entry with a larger id than the one before", op,
                 j);
    }
  for (int64_t i = off[0]; i < off[R]; ++i) {
    MX_CHECK(e[i].token >= 0 && e[i].token < V, "{}: entry {} has token {} outside the vocabulary of {}", op, i,
             e[i].token, V);
    MX_CHECK(e[i].kind == LogitsEntryKind::Penalty || e[i].kind == LogitsEntryKind::Bias ||
                 e[i].kind == LogitsEntryKind::Ban || e[i].kind == LogitsEntryKind::Mask ||
                 e[i].kind == LogitsEntryKind::MaskOthers,
             "{}: entry {} has kind {}", op, i, int32_t(e[i].kind));
    MX_CHECK(e[i].kind != LogitsEntryKind::Mask || e[i].token % 32 == 0,
             "{}: mask entry {} starts at id {}, not a multiple of 32", op, i, e[i].token);
  }
  return ok_status();
}

// The shapes shared by logits_process and logprobs_chosen: the (R, V) logits and the row entries.
Status check_logits_entries(const char* op, const Tensor& logits, const Tensor& offsets, const Tensor& entries,
                            const Tensor& saved, Device dev) {
  MX_TRY(expect(logits, op, "logits", {DType::F32}, 2, dev));
  MX_TRY(expect(offsets, op, "offsets", {DType::I32}, 1, dev));
  MX_TRY(expect(entries, op, "entries", {DType::I32}, 2, dev));
  MX_TRY(expect(saved, op, "saved", {DType::F32}, 1, dev));
  MX_TRY(same_dim(op, "offsets (rows + 1)", offsets.dim(0), logits.dim(0) + 1));
  MX_TRY(same_dim(op, "entry width (LogitsEntry)", entries.dim(1), 4));
  MX_TRY(same_dim(op, "saved (one per entry)", saved.dim(0), entries.dim(0)));
  if (dev == Device::CPU) MX_TRY(check_host_entries(op, offsets, entries, logits.dim(1)));
  return ok_status();
}

// rows_k (R) i32; on the host also each value <= kMaxTopLogprobs (the kernels clamp it).
Status check_rows_k(const char* op, const Tensor& rows_k, int64_t R, Device dev) {
  MX_TRY(expect(rows_k, op, "rows_k", {DType::I32}, 1, dev));
  MX_TRY(same_dim(op, "rows_k", rows_k.dim(0), R));
  if (dev == Device::CPU)
    for (int64_t r = 0; r < R; ++r)
      MX_CHECK(rows_k.ptr<const int32_t>()[r] <= kMaxTopLogprobs, "{}: rows_k[{}] = {} > {}", op, r,
               rows_k.ptr<const int32_t>()[r], kMaxTopLogprobs);
  return ok_status();
}
}  // namespace

Status logprobs_topk(Context& cx, const LogprobsTopkArgs& a) {
  const Device dev = a.logits.device;
  const char* op = "logprobs_topk";
  MX_TRY(expect(a.logits, op, "logits", {DType::F32}, 2, dev));
  const int64_t R = a.logits.dim(0), V = a.logits.dim(1);
  MX_CHECK(V >= 1 && V <= INT32_MAX, "logprobs_topk: vocabulary of {}", V);
  MX_TRY(check_rows_k(op, a.rows_k, R, dev));
  MX_TRY(expect(a.lse, op, "lse", {DType::F32}, 1, dev));
  MX_TRY(same_dim(op, "lse", a.lse.dim(0), R));
  for (const auto& [t, name, dtype] : {std::tuple{&a.top_ids, "top_ids", DType::I32},
                                       std::tuple{&a.top_logprobs, "top_logprobs", DType::F32}}) {
    MX_TRY(expect(*t, op, name, {dtype}, 2, dev));
    MX_TRY(same_dim(op, "top rows", t->dim(0), R));
    MX_TRY(same_dim(op, "top columns (kMaxTopLogprobs)", t->dim(1), kMaxTopLogprobs));
  }
  // Rows without logprobs read nothing: count the outputs only (rows_k is device data).
  return route(cx, {op, "f32_logprobs_topk"}, dev, a, cpu::logprobs_topk, MX_CUDA_FN(logprobs_topk),
               nbytes({&a.rows_k, &a.lse, &a.top_ids, &a.top_logprobs}));
}

Status logits_process(Context& cx, const LogitsProcessArgs& a) {
  const Device dev = a.logits.device;
  MX_TRY(check_logits_entries("logits_process", a.logits, a.offsets, a.entries, a.saved, dev));
  MX_TRY(expect(a.penalties, "logits_process", "penalties", {DType::F32}, 2, dev));
  MX_TRY(same_dim("logits_process", "penalties rows", a.penalties.dim(0), a.logits.dim(0)));
  MX_TRY(same_dim("logits_process", "penalties columns", a.penalties.dim(1), 3));
  return route(cx, {"logits_process", "f32_logits_process"}, dev, a, cpu::logits_process, MX_CUDA_FN(logits_process),
               nbytes({&a.offsets, &a.penalties}));
}

Status logprobs_chosen(Context& cx, const LogprobsChosenArgs& a) {
  const Device dev = a.logits.device;
  MX_TRY(check_logits_entries("logprobs_chosen", a.logits, a.offsets, a.entries, a.saved, dev));
  const int64_t R = a.logits.dim(0), V = a.logits.dim(1);
  MX_TRY(check_rows_k("logprobs_chosen", a.rows_k, R, dev));
  MX_TRY(expect(a.ids, "logprobs_chosen", "ids", {DType::I32}, 1, dev));
  MX_TRY(expect(a.lse, "logprobs_chosen", "lse", {DType::F32}, 1, dev));
  MX_TRY(expect(a.logprobs, "logprobs_chosen", "logprobs", {DType::F32}, 1, dev));
  for (const Tensor* t : {&a.ids, &a.lse, &a.logprobs}) MX_TRY(same_dim("logprobs_chosen", "rows", t->dim(0), R));
  if (dev == Device::CPU)
    for (int64_t r = 0; r < R; ++r) {
      const int32_t id = a.ids.ptr<const int32_t>()[r];
      MX_CHECK(a.rows_k.ptr<const int32_t>()[r] < 0 || (id >= 0 && id < V), "logprobs_chosen: ids[{}] = {} with a "
               "vocabulary of {}", r, id, V);
    }
  return route(cx, {"logprobs_chosen", "f32_logprobs_chosen"}, dev, a, cpu::logprobs_chosen, MX_CUDA_FN(logprobs_chosen),
               nbytes({&a.ids, &a.rows_k, &a.lse, &a.logprobs}));
}

Status take_prev_tokens(Context& cx, const TakePrevTokensArgs& a) {
  const Device dev = a.tokens.device;
  MX_TRY(expect(a.tokens, "take_prev_tokens", "tokens", {DType::I32}, 1, dev));
  MX_TRY(expect(a.from, "take_prev_tokens", "from", {DType::I32}, 1, dev));
  MX_TRY(expect(a.prev, "take_prev_tokens", "prev", {DType::I32}, 1, dev));
  MX_TRY(same_dim("take_prev_tokens", "tokens", a.from.dim(0), a.tokens.dim(0)));
  return route(cx, {"take_prev_tokens", "i32_take_prev_tokens"}, dev, a, cpu::take_prev_tokens, MX_CUDA_FN(take_prev_tokens), 3 * nbytes({&a.tokens}));
}

Status apply_table_updates(Context& cx, const TableUpdatesArgs& a) {
  const Device dev = a.tables.device;
  MX_TRY(expect(a.tables, "apply_table_updates", "tables", {DType::I32}, 2, dev));
  MX_TRY(expect(a.updates, "apply_table_updates", "updates", {DType::I32}, 2, dev));
  MX_TRY(expect(a.count, "apply_table_updates", "count", {DType::I32}, 1, dev));
  MX_TRY(same_dim("apply_table_updates", "update width", a.updates.dim(1), 3));
  return route(cx, {"apply_table_updates", "i32_apply_table_updates"}, dev, a, cpu::apply_table_updates, MX_CUDA_FN(apply_table_updates),
               nbytes({&a.updates}));
}

Status add_i32(Context& cx, const AddI32Args& a) {
  const Device dev = a.x.device;
  MX_TRY(expect(a.x, "add_i32", "x", {DType::I32}, a.x.ndim, dev));
  return route(cx, {"add_i32", "i32_add"}, dev, a, cpu::add_i32, MX_CUDA_FN(add_i32), 2 * nbytes({&a.x}));
}

namespace {
// The tiled attention kernel this device runs (the wgmma one where the build has sm_90a code for it).
std::string prefill_attention_kernel() {
#ifdef MXSERVE_HAVE_CUDA
  if (cuda::attention_prefill_wgmma_available()) return "sm90_bf16_attention_prefill (tiled, wgmma)";
#endif
  return "bf16_attention_prefill (tiled, mma.sync)";
}
std::string grouped_bf16_gemms() {
  bool wgmma = false;
#ifdef MXSERVE_HAVE_CUDA
  wgmma = cuda::moe_grouped_wgmma_available();
#endif
  return fmt::format("BF16 activations: bf16_mxfp4w_moe_thin (16-pair tiles) up to {} pairs per expert on average, "
                     "{} pairs per expert, 128-pair tiles from {}",
                     kShortTileMaxPairsPerExpert,
                     wgmma ? fmt::format("sm90_bf16_mxfp4w_moe_grouped (weights decoded into the A registers) from {}",
                                         kWgmmaMinPairsPerExpert)
                           : std::string("bf16_mxfp4w_moe_grouped (mma.sync) above that"),
                     kTallTileMinPairsPerExpert);
}
}  // namespace

std::vector<std::string> dispatch_summary(const Context& cx) {
  if (cx.device() == Device::CPU) return {"all ops: CPU reference (fp32 activations, fp32 accumulation)"};
  return {
      fmt::format("linear (o, lm_head): T <= {} -> bf16_bf16w_gemv, else [rmsnorm +] cuBLASLt BF16 GEMM",
                  kLinearGemvMaxTokens),
      fmt::format("qkv_projection: T <= {} -> bf16_bf16w_gemv with the attention RMSNorm, RoPE and the KV-cache "
                  "write fused, else linear -> qkv_rope_cache",
                  kLinearGemvMaxTokens),
      fmt::format("moe_router: T <= {} -> bf16_bf16w_norm_router (rmsnorm + router GEMV in one kernel), else "
                  "rmsnorm -> linear; then router_topk where moe does not select from the logits (T > {})",
                  kMoeRouterFusedMaxTokens, kMoeGemvMaxTokens),
      fmt::format("moe: T <= {} -> bf16_mxfp4w_moe_gemv (top-k ids, no sort), else {} (device routing + "
                  "grouped MXFP4 GEMM, {})",
                  kMoeGemvMaxTokens,
                  cx.moe_activation() == MoeActivation::FP8 ? "expand + e4m3_mxfp4w_moe_grouped" : "bf16_mxfp4w_moe_grouped",
                  cx.moe_activation() == MoeActivation::FP8
                      ? "FP8 E4M3 activations with per-32 E8M0 scales, 64-pair tiles"
                      : grouped_bf16_gemms()),
      fmt::format("attention: T >= {} x sequences and head_dim 64 -> {}, else bf16_attention_decode (split "
                  "over the KV length); both with sinks and the window",
                  kAttentionPrefillMinTokensPerSeq, prefill_attention_kernel()),
      fmt::format("MXFP4 dense weights (--mxfp4-layers): linear and qkv_projection T = 1 -> bf16_mxfp4w_gemv, "
                  "T <= {} -> bf16_mxfp4w_gemv_mma (tensor cores; same fusions), else mxfp4_rows_to_bf16 chunks + cuBLASLt; moe_router as for BF16 "
                  "(bf16_bf16w_norm_router decodes MXFP4 rows); embed -> mxfp4_rows_to_bf16",
                  kLinearMxfp4GemvMaxTokens),
      "rmsnorm (final norm), silu_mul, sample, logprobs_topk, logits_process, logprobs_chosen: one kernel each",
  };
}

// The tensor-parallel collectives (kernels/collective.h) go through route() for the profile only:
// each group implements its own backend.
namespace {
struct CollectiveCall {
  std::function<Status()> run;
};
Status run_call(const CollectiveCall& c) { return c.run(); }
constexpr auto run_call_on = [](auto&, const CollectiveCall& c) { return c.run(); };
}  // namespace

Status all_reduce_add(Context& cx, Collective& c, PartialSlot s, const Tensor& x) {
  const CollectiveCall call{[&] { return c.all_reduce_add(cx, s, x); }};
  return route(cx, {"all_reduce_add", "bf16_all_reduce_add"}, x.device, call, run_call, run_call_on,
               double(x.nbytes()) * (c.size() + 1));
}

Status gather_logits(Context& cx, Collective& c, const Tensor& full, int64_t R, Device device) {
  const CollectiveCall call{[&] { return c.gather_logits(cx, full, R); }};
  return route(cx, {"gather_logits", "f32_gather_logits"}, device, call, run_call, run_call_on, 2.0 * double(full.nbytes()));
}

Status broadcast(Context& cx, Collective& c, int64_t n, Device device) {
  const CollectiveCall call{[&] { return c.broadcast(cx, n); }};
  return route(cx, {"broadcast", "i32_broadcast"}, device, call, run_call, run_call_on, 4.0 * double(n));
}

}  // namespace mx::ops
