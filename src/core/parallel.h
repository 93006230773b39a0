// parallel_for over [0, n) on a process-wide thread pool (size: MXSERVE_THREADS or the core count).
#pragma once

#include <cstdint>
#include <functional>

namespace mx {

int num_threads();
// Calls fn(begin, end) on disjoint chunks covering [0, n); returns when all are done.
// Chunks are at least `grain` items. Runs inline when n is small or nested.
void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

}  // namespace mx
