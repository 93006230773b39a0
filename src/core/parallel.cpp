// ThreadPool, and the process-wide one behind parallel_for.
#include "core/parallel.h"

#include <algorithm>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

namespace mx {
namespace {

thread_local bool t_in_pool_task = false;

int configured_threads() {
  if (const char* env = std::getenv("MXSERVE_THREADS")) {
    const int n = std::atoi(env);
    if (n > 0) return n;
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

ThreadPool& pool() {
  static ThreadPool p(configured_threads() - 1);
  return p;
}

std::mutex& run_mutex() {
  static std::mutex m;
  return m;
}

}  // namespace

ThreadPool::ThreadPool(int workers) {
  for (int i = 0; i < workers; ++i) workers_.emplace_back([this] { loop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(m_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& w : workers_) w.join();
}

void ThreadPool::run(int64_t chunks, const std::function<void(int64_t)>& task) {
  std::unique_lock lock(m_);
  task_ = &task;
  chunks_ = chunks;
  next_ = 0;
  pending_ = chunks;
  ++generation_;
  cv_.notify_all();
  lock.unlock();
  work();
  lock.lock();
  done_cv_.wait(lock, [&] { return pending_ == 0; });
  task_ = nullptr;
}

void ThreadPool::work() {
  const bool outer = t_in_pool_task;
  t_in_pool_task = true;
  for (;;) {
    int64_t i;
    const std::function<void(int64_t)>* task;
    {
      std::lock_guard lock(m_);
      if (!task_ || next_ >= chunks_) break;
      i = next_++;
      task = task_;
    }
    (*task)(i);
    std::lock_guard lock(m_);
    if (--pending_ == 0) done_cv_.notify_all();
  }
  t_in_pool_task = outer;
}

void ThreadPool::loop() {
  uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock lock(m_);
      cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
    }
    work();
  }
}

int num_threads() { return pool().size(); }

void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  const int64_t max_chunks = (n + grain - 1) / grain;
  const int64_t chunks = std::min<int64_t>(max_chunks, int64_t(num_threads()) * 4);
  if (chunks <= 1 || t_in_pool_task) {
    fn(0, n);
    return;
  }
  const int64_t step = (n + chunks - 1) / chunks;
  std::function<void(int64_t)> task = [&](int64_t c) {
    const int64_t b = c * step, e = std::min(n, b + step);
    if (b < e) fn(b, e);
  };
  std::lock_guard lock(run_mutex());  // one parallel region at a time
  pool().run(chunks, task);
}

}  // namespace mx
