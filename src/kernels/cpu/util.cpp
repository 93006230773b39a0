// CPU versions of the utility ops: seeded random fill (splitmix64 per element, identical on the
// CUDA backend), i32 increment, and the engine step's prologue (previous tokens, table updates).
#include <algorithm>

#include "core/parallel.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/random_hash.h"

namespace mx::cpu {

Status fill_random(const ops::FillRandomArgs& a) {
  const int64_t n = a.out.numel();
  parallel_for(n, 1 << 16, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const uint64_t h = random_hash(a.seed, uint64_t(i));
      if (a.out.dtype == DType::U8) {
        a.out.ptr<uint8_t>()[i] = uint8_t(a.byte_lo + int(h % uint64_t(a.byte_hi - a.byte_lo + 1)));
      } else {
        const float v = a.offset + a.scale * hash_to_signed_unit(h);
        if (a.out.dtype == DType::BF16) a.out.ptr<bf16>()[i] = f32_to_bf16(v);
        else a.out.ptr<float>()[i] = v;
      }
    }
  });
  return ok_status();
}

Status add_i32(const ops::AddI32Args& a) {
  for (int64_t i = 0; i < a.x.numel(); ++i) a.x.ptr<int32_t>()[i] += a.value;
  return ok_status();
}

Status take_prev_tokens(const ops::TakePrevTokensArgs& a) {
  const int32_t* from = a.from.ptr<const int32_t>();
  for (int64_t i = 0; i < a.tokens.numel(); ++i)
    if (from[i] >= 0 && from[i] < a.prev.numel()) a.tokens.ptr<int32_t>()[i] = a.prev.ptr<const int32_t>()[from[i]];
  return ok_status();
}

Status apply_table_updates(const ops::TableUpdatesArgs& a) {
  const int64_t n = std::min<int64_t>(a.count.ptr<const int32_t>()[0], a.updates.dim(0));
  const int64_t rows = a.tables.dim(0), width = a.tables.dim(1);
  for (int64_t u = 0; u < n; ++u) {
    const int32_t* up = a.updates.ptr<const int32_t>() + 3 * u;
    if (up[0] >= 0 && up[0] < rows && up[1] >= 0 && up[1] < width) a.tables.ptr<int32_t>()[up[0] * width + up[1]] = up[2];
  }
  return ok_status();
}

}  // namespace mx::cpu
