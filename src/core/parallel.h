// parallel_for over [0, n) on a process-wide thread pool (size: MXSERVE_THREADS or the core count),
// and ThreadPool, that pool's kind, for an owner that wants workers of its own (the engine's
// guided-decoding masks).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace mx {

int num_threads();
// Calls fn(begin, end) on disjoint chunks covering [0, n); returns when all are done.
// Chunks are at least `grain` items. Runs inline when n is small or nested.
void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

class ThreadPool {
 public:
  explicit ThreadPool(int workers);  // threads besides the one that calls run()
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;
  int size() const { return int(workers_.size()) + 1; }
  // Calls task(i) for each i in [0, n) on the workers and the calling thread; returns when all
  // are done. One run at a time.
  void run(int64_t n, const std::function<void(int64_t)>& task);

 private:
  void work();
  void loop();

  std::vector<std::thread> workers_;
  std::mutex m_;
  std::condition_variable cv_, done_cv_;
  const std::function<void(int64_t)>* task_ = nullptr;
  int64_t chunks_ = 0, next_ = 0, pending_ = 0;
  uint64_t generation_ = 0;
  bool stop_ = false;
};

}  // namespace mx
