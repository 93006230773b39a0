// Paged KV cache: per layer, K and V pools of fixed-size blocks (num_blocks, B, Hkv, Dh) on the
// model's device, a free list of block ids, and per-sequence block tables. Many sequences share
// one pool; a sequence grows block by block. With SlidingLayers::Ring, the sliding-window layers
// get their own small pool instead: each sequence owns a ring of R blocks there, enough for the
// window plus one forward call's tokens, and its sliding block table maps logical block i to
// ring[i mod R] — the kernels address both kinds of layer the same way. With SlidingLayers::Window
// (the engine) the sliding layers get a pool of their own too, but a sequence holds there only the
// blocks that its next tokens' windows reach: blocks wholly before the window go back to the pool
// as the sequence advances, whatever the size of its prefill chunks. --kv-cache-dtype fp8 stores
// K and V in FP8 E4M3 with one f32 scale per layer for each (docs/KV_CACHE.md).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string_view>
#include <vector>

#include "kernels/ops.h"
#include "model/config.h"

namespace mx {

enum class SlidingLayers { Full, Ring, Window };
// Reserved: block 0 of every pool is never handed out. Padding tokens of a CUDA-graph batch write
// there, and table entries that hold no block point there.
enum class PadBlock { None, Reserved };
constexpr int32_t kPadBlock = 0;

// --kv-cache-dtype (vLLM's flag): Auto keeps K and V in the activation dtype (f32 on the CPU, bf16
// on CUDA); Fp8 stores them as E4M3, value / scale, with a K and a V scale per layer.
enum class KvCacheDtype { Auto, Fp8 };
Result<KvCacheDtype> parse_kv_cache_dtype(std::string_view name);  // "auto" or "fp8"
std::string_view kv_cache_dtype_name(KvCacheDtype d);                // "auto" or "fp8"
// The element type of a cache on `device`: the one rule the allocation and the memory budget share.
DType kv_element_dtype(KvCacheDtype d, Device device);
std::string_view kv_element_name(KvCacheDtype d, Device device);  // "f32", "bf16" or "fp8 e4m3", for logs
// --kv-scale: "S" (K and V alike) or "K,V", positive finite floats.
Result<std::array<float, 2>> parse_kv_scales(std::string_view text);

struct KvCacheArgs {
  int num_blocks = 0;  // blocks of the full-attention pool (and of all layers with Full)
  int block_size = 16;
  SlidingLayers sliding = SlidingLayers::Full;
  int max_seqs = 1;         // Ring: sequences that can hold a ring at once
  int max_call_tokens = 1;  // Ring: most tokens of one sequence in one forward call
  int window_blocks = 0;    // Window: blocks of the sliding layers' pool
  PadBlock pad = PadBlock::None;
  KvCacheDtype dtype = KvCacheDtype::Auto;
  std::optional<std::array<float, 2>> fixed_scales;  // Fp8 only: (K, V) from --kv-scale; none: calibrate
};

class KvCache {
 public:
  static Result<KvCache> create(const ModelConfig& c, Device device, int num_blocks, int block_size);
  static Result<KvCache> create(const ModelConfig& c, Device device, const KvCacheArgs& args);

  int block_size() const { return block_size_; }
  int num_blocks() const { return num_blocks_; }  // blocks a sequence can get (the pad block not counted)
  int free_blocks() const { return int(free_.size()); }
  const std::vector<ops::KvLayer>& layers() const { return layers_; }
  bool has_rings() const { return ring_blocks_ > 0; }
  bool has_window_pool() const { return window_pool_ > 0; }
  int window_pool_blocks() const { return window_pool_; }
  int free_window_blocks() const { return int(free_window_.size()); }

  // FP8: every layer's scales live in one (L, 2) f32 device buffer (each layer's `scales` views
  // its row), 1.0 or the fixed scales at creation. scales_pending() is true until the engine has
  // launched the step that calibrates them (never with fixed scales, never for Auto).
  KvCacheDtype dtype() const { return dtype_; }
  bool scales_pending() const { return scales_pending_; }
  bool scales_fixed() const { return scales_fixed_; }  // created with fixed_scales
  void mark_calibrated() { scales_pending_ = false; }
  Status set_scales(float k, float v);              // every layer's; FP8 only
  Result<std::vector<float>> read_scales() const;  // (L, 2): K, V of each layer; FP8 only
  // bench: fills every block with random values (a context of some depth; FP8: bytes 0x00-0x3f,
  // finite and non-negative, with scales 1, which counts as calibrated).
  Status fill_random(ops::Context& cx, uint64_t seed);  // on cx's stream, then waits for it

  // Makes `table` hold enough blocks for `tokens` positions (and gives a new sequence its ring);
  // fails (changing nothing) when a pool has too few free blocks.
  Status reserve(std::vector<int32_t>& table, int64_t tokens);
  void release(std::vector<int32_t>& table);  // returns the blocks (and the ring) to the pools
  // The sliding layers' block table of a sequence (same length as `table`); `table` itself
  // without rings.
  std::vector<int32_t> sliding_table(const std::vector<int32_t>& table) const;

  // Window: makes the sliding layers' table `window` (logical blocks, like a full table) hold
  // blocks for positions [first_live, tokens), after giving back those wholly before first_live
  // (their entries become kPadBlock). False when the pool is short (the table keeps what it had).
  bool reserve_window(std::vector<int32_t>& window, int64_t first_live, int64_t tokens);
  void release_window(std::vector<int32_t>& window);

 private:
  Status make_scales(const std::optional<std::array<float, 2>>& fixed);

  std::vector<ops::Buffer> storage_;
  std::vector<ops::KvLayer> layers_;
  Tensor scales_;  // (L, 2) f32, FP8 only
  Device device_ = Device::CPU;
  KvCacheDtype dtype_ = KvCacheDtype::Auto;
  bool scales_pending_ = false, scales_fixed_ = false;
  std::vector<int32_t> free_, free_ring_blocks_, free_window_;
  std::map<int32_t, std::vector<int32_t>> rings_;  // first full block of a sequence -> its ring
  int num_blocks_ = 0, block_size_ = 0, ring_blocks_ = 0, window_pool_ = 0;
};

}  // namespace mx
