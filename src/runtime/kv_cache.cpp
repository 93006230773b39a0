// Paged KV cache pools, block bookkeeping, the sliding-layer rings, and the FP8 cache's scales.
#include "runtime/kv_cache.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <utility>

#include "kernels/owned_tensor.h"

namespace mx {
namespace {

Result<ops::KvLayer> make_layer(const ModelConfig& c, Device device, DType dtype, int blocks, int block_size,
                                std::vector<ops::Buffer>& storage) {
  const std::initializer_list<int64_t> shape = {blocks, block_size, c.num_key_value_heads, c.head_dim};
  ops::KvLayer layer;
  for (Tensor* t : {&layer.k, &layer.v}) {
    MX_ASSIGN(*t, ops::allocate_tensor(storage, device, dtype, shape));
  }
  return layer;
}

// The largest byte fill_random writes into an FP8 cache: E4M3 0x3f = 1.875, so every byte drawn is a
// finite, non-negative value (0x7f and 0xff, the NaN codes, are never written).
constexpr int kFp8RandomMaxByte = 0x3f;

}  // namespace

Result<KvCacheDtype> parse_kv_cache_dtype(std::string_view name) {
  if (name == "auto") return KvCacheDtype::Auto;
  if (name == "fp8") return KvCacheDtype::Fp8;
  return MX_ERROR("--kv-cache-dtype: unknown value '{}' (use auto or fp8)", name);
}

std::string_view kv_cache_dtype_name(KvCacheDtype d) { return d == KvCacheDtype::Fp8 ? "fp8" : "auto"; }

DType kv_element_dtype(KvCacheDtype d, Device device) {
  if (d == KvCacheDtype::Fp8) return DType::F8_E4M3;
  return ops::act_dtype(device);
}

std::string_view kv_element_name(KvCacheDtype d, Device device) {
  if (d == KvCacheDtype::Fp8) return "fp8 e4m3";
  return device == Device::CPU ? "f32" : "bf16";
}

Result<std::array<float, 2>> parse_kv_scales(std::string_view text) {
  std::array<float, 2> s{};
  const size_t comma = text.find(',');
  const std::string_view parts[2] = {text.substr(0, comma),
                                     comma == std::string_view::npos ? text.substr(0, comma) : text.substr(comma + 1)};
  for (int i = 0; i < 2; ++i) {
    const std::string_view p = parts[i];
    const auto [end, ec] = std::from_chars(p.data(), p.data() + p.size(), s[size_t(i)]);
    MX_CHECK(ec == std::errc() && end == p.data() + p.size() && std::isfinite(s[size_t(i)]) && s[size_t(i)] > 0,
             "--kv-scale: '{}' is not a positive finite number (use S, or K,V for separate K and V scales)", p);
    MX_CHECK(s[size_t(i)] >= ops::kMinKvScale && s[size_t(i)] <= ops::kMaxKvScale,
             "--kv-scale: {} is outside {:g}..{:g} (an element holds value / scale, at most 448)", p,
             ops::kMinKvScale, ops::kMaxKvScale);
  }
  return s;
}

Result<KvCache> KvCache::create(const ModelConfig& c, Device device, int num_blocks, int block_size) {
  return create(c, device, KvCacheArgs{.num_blocks = num_blocks, .block_size = block_size});
}

Result<KvCache> KvCache::create(const ModelConfig& c, Device device, const KvCacheArgs& a) {
  MX_CHECK(a.num_blocks > 0 && a.block_size > 0, "kv cache: need positive block count and size ({}, {})",
           a.num_blocks, a.block_size);
  KvCache kv;
  kv.num_blocks_ = a.num_blocks;
  kv.block_size_ = a.block_size;
  if (a.sliding == SlidingLayers::Ring) {
    MX_CHECK(a.max_seqs > 0 && a.max_call_tokens > 0, "kv cache: rings need max_seqs and max_call_tokens");
    // Live positions in one call: the window before the first token plus the call's tokens;
    // one more block because they need not start on a block boundary.
    kv.ring_blocks_ = (a.max_call_tokens + c.sliding_window - 1 + a.block_size - 1) / a.block_size + 1;
  }
  const int pad = a.pad == PadBlock::Reserved ? 1 : 0;
  if (a.sliding == SlidingLayers::Window) {
    MX_CHECK(pad && a.window_blocks > 0, "kv cache: a window pool needs window_blocks and the pad block");
    kv.window_pool_ = a.window_blocks;
  }
  const int ring_pool = kv.ring_blocks_ * a.max_seqs;
  const int sliding_pool = kv.window_pool_ ? kv.window_pool_ + pad : ring_pool;
  const DType dtype = kv_element_dtype(a.dtype, device);
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    const bool own_pool = sliding_pool > 0 && c.window_of_layer(l) > 0;
    MX_ASSIGN(ops::KvLayer layer,
              make_layer(c, device, dtype, own_pool ? sliding_pool : a.num_blocks + pad, a.block_size, kv.storage_));
    kv.layers_.push_back(layer);
  }
  kv.device_ = device;
  kv.dtype_ = a.dtype;
  MX_TRY(kv.make_scales(a.fixed_scales));
  for (int b = a.num_blocks + pad - 1; b >= pad; --b) kv.free_.push_back(b);
  for (int b = ring_pool - 1; b >= 0 && kv.ring_blocks_ > 0; --b) kv.free_ring_blocks_.push_back(b);
  for (int b = kv.window_pool_ + pad - 1; b >= pad && kv.window_pool_ > 0; --b) kv.free_window_.push_back(b);
  return kv;
}

Status KvCache::make_scales(const std::optional<std::array<float, 2>>& fixed) {
  MX_CHECK(dtype_ == KvCacheDtype::Fp8 || !fixed, "kv cache: fixed scales (--kv-scale) need --kv-cache-dtype fp8");
  if (dtype_ != KvCacheDtype::Fp8) return ok_status();
  const int64_t L = int64_t(layers_.size());
  MX_ASSIGN(ops::Buffer b, ops::Buffer::allocate(device_, size_t(L) * 2 * sizeof(float)));
  scales_ = b.view(DType::F32, {L, 2});
  storage_.push_back(std::move(b));
  for (int64_t l = 0; l < L; ++l) layers_[size_t(l)].scales = Tensor(scales_.ptr<float>() + 2 * l, DType::F32, {2}, device_);
  scales_fixed_ = fixed.has_value();
  scales_pending_ = !scales_fixed_;
  const std::array<float, 2> s = fixed.value_or(std::array<float, 2>{1.0f, 1.0f});
  return set_scales(s[0], s[1]);
}

Status KvCache::set_scales(float k, float v) {
  MX_CHECK(dtype_ == KvCacheDtype::Fp8, "kv cache: scales are for an fp8 cache");
  MX_CHECK(k >= ops::kMinKvScale && k <= ops::kMaxKvScale && v >= ops::kMinKvScale && v <= ops::kMaxKvScale,
           "kv cache: scales must be within {:g}..{:g} ({}, {})", ops::kMinKvScale, ops::kMaxKvScale, k, v);
  std::vector<float> host(size_t(scales_.numel()));
  for (size_t i = 0; i < host.size(); i += 2) host[i] = k, host[i + 1] = v;
  return ops::copy(scales_, Tensor(host.data(), DType::F32, {scales_.dim(0), 2}));
}

Result<std::vector<float>> KvCache::read_scales() const {
  MX_CHECK(dtype_ == KvCacheDtype::Fp8, "kv cache: scales are for an fp8 cache");
  std::vector<float> host(size_t(scales_.numel()));
  MX_TRY(ops::copy(Tensor(host.data(), DType::F32, {scales_.dim(0), 2}), scales_));
  return host;
}

Status KvCache::fill_random(ops::Context& cx, uint64_t seed) {
  for (const ops::KvLayer& layer : layers_) {
    for (const auto& [t, s] : {std::pair{layer.k, seed}, std::pair{layer.v, seed + 1}}) {
      if (!layer.fp8()) {
        MX_TRY(ops::fill_random(cx, {.out = t, .seed = s, .scale = 1.0f}));
        continue;
      }
      Tensor bytes = t;  // the E4M3 codes as bytes
      bytes.dtype = DType::U8;
      MX_TRY(ops::fill_random(cx, {.out = bytes, .seed = s, .byte_lo = 0, .byte_hi = kFp8RandomMaxByte}));
    }
  }
  if (dtype_ == KvCacheDtype::Fp8) {
    MX_TRY(set_scales(1.0f, 1.0f));
    mark_calibrated();
  }
  return ops::synchronize(cx);
}

Status KvCache::reserve(std::vector<int32_t>& table, int64_t tokens) {
  const int64_t need = (tokens + block_size_ - 1) / block_size_ - int64_t(table.size());
  if (need <= 0) return ok_status();
  MX_CHECK(need <= int64_t(free_.size()), "kv cache full: {} more blocks needed, {} free of {}", need, free_.size(),
           num_blocks_);
  const bool new_sequence = table.empty();
  if (new_sequence && has_rings())
    MX_CHECK(int(free_ring_blocks_.size()) >= ring_blocks_, "kv cache: no free sliding-window ring ({} sequences)",
             rings_.size());
  for (int64_t i = 0; i < need; ++i) {
    table.push_back(free_.back());
    free_.pop_back();
  }
  if (new_sequence && has_rings()) {
    std::vector<int32_t>& ring = rings_[table.front()];
    for (int i = 0; i < ring_blocks_; ++i) {
      ring.push_back(free_ring_blocks_.back());
      free_ring_blocks_.pop_back();
    }
  }
  return ok_status();
}

void KvCache::release(std::vector<int32_t>& table) {
  if (!table.empty() && has_rings()) {
    auto it = rings_.find(table.front());
    if (it != rings_.end()) {
      free_ring_blocks_.insert(free_ring_blocks_.end(), it->second.begin(), it->second.end());
      rings_.erase(it);
    }
  }
  for (int32_t b : table) free_.push_back(b);
  table.clear();
}

bool KvCache::reserve_window(std::vector<int32_t>& window, int64_t first_live, int64_t tokens) {
  const int64_t B = block_size_, first = std::max<int64_t>(first_live, 0) / B, end = (tokens + B - 1) / B;
  for (int64_t i = 0; i < std::min<int64_t>(first, int64_t(window.size())); ++i)
    if (window[size_t(i)] != kPadBlock) free_window_.push_back(std::exchange(window[size_t(i)], kPadBlock));
  int64_t need = 0;
  for (int64_t i = first; i < end; ++i) need += i >= int64_t(window.size()) || window[size_t(i)] == kPadBlock;
  if (need > int64_t(free_window_.size())) return false;
  if (int64_t(window.size()) < end) window.resize(size_t(end), kPadBlock);
  for (int64_t i = first; i < end; ++i) {
    if (window[size_t(i)] != kPadBlock) continue;
    window[size_t(i)] = free_window_.back();
    free_window_.pop_back();
  }
  return true;
}

void KvCache::release_window(std::vector<int32_t>& window) {
  for (int32_t b : window)
    if (b != kPadBlock) free_window_.push_back(b);
  window.clear();
}

std::vector<int32_t> KvCache::sliding_table(const std::vector<int32_t>& table) const {
  if (!has_rings() || table.empty()) return table;
  const std::vector<int32_t>& ring = rings_.at(table.front());
  std::vector<int32_t> row(table.size());
  for (size_t i = 0; i < row.size(); ++i) row[i] = ring[i % ring.size()];
  return row;
}

}  // namespace mx
