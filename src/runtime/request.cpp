// RequestStream: a mutex + condition variable mailbox between the engine thread and a client.
#include "runtime/request.h"

namespace mx {

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::Stop: return "stop";
    case FinishReason::Length: return "length";
    case FinishReason::Cancelled: return "cancelled";
    case FinishReason::Error: return "error";
    case FinishReason::None: break;
  }
  return "none";
}

StreamUpdate RequestStream::wait(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, timeout, [&] { return !pending_.empty() || (reason_ != FinishReason::None && !delivered_end_); });
  StreamUpdate u;
  u.tokens.swap(pending_);
  u.logprobs.swap(pending_logprobs_);
  u.logits.swap(pending_logits_);
  if (reason_ != FinishReason::None) {
    u.reason = reason_;
    u.error = error_;
    delivered_end_ = true;
  }
  return u;
}

void RequestStream::cancel() {
  std::lock_guard lock(mu_);
  cancelled_ = true;
}

bool RequestStream::cancelled() const {
  std::lock_guard lock(mu_);
  return cancelled_;
}

RequestTiming RequestStream::timing() const {
  std::lock_guard lock(mu_);
  return timing_;
}

void RequestStream::push(int32_t token, std::optional<TokenLogprob> logprob, std::span<const float> logits) {
  {
    std::lock_guard lock(mu_);
    pending_.push_back(token);
    if (logprob) pending_logprobs_.push_back(std::move(*logprob));
    pending_logits_.insert(pending_logits_.end(), logits.begin(), logits.end());
  }
  cv_.notify_all();
}

void RequestStream::finish(FinishReason reason, std::string error) {
  {
    std::lock_guard lock(mu_);
    if (reason_ != FinishReason::None) return;
    reason_ = reason;
    error_ = std::move(error);
  }
  cv_.notify_all();
}

void RequestStream::set_timing(const RequestTiming& t) {
  std::lock_guard lock(mu_);
  timing_ = t;
}

}  // namespace mx
