// InflightRequests: the engine requests the server has submitted and not seen end, so that a
// shutdown whose drain deadline passed can cancel them (their handlers then return at once).
#pragma once

#include <algorithm>
#include <memory>
#include <mutex>
#include <vector>

#include "runtime/request.h"

namespace mx::server {

class InflightRequests {
 public:
  void add(const std::shared_ptr<RequestStream>& s) {
    std::lock_guard lock(mu_);
    if (streams_.size() >= 2 * live_after_prune_ + 64) {  // amortized: drop the ones that ended
      std::erase_if(streams_, [](const auto& w) { return w.expired(); });
      live_after_prune_ = streams_.size();
    }
    streams_.push_back(s);
  }
  void cancel_all() {
    std::lock_guard lock(mu_);
    for (const auto& w : streams_)
      if (auto s = w.lock()) s->cancel();
  }

 private:
  std::mutex mu_;
  std::vector<std::weak_ptr<RequestStream>> streams_;
  size_t live_after_prune_ = 0;
};

}  // namespace mx::server
