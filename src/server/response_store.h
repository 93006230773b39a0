// ResponseStore: the Responses API's state — recent responses (the response object and the whole
// conversation up to and including its output items), kept in memory under a byte budget and an
// age limit (--responses-store-bytes, --responses-store-ttl), honouring `store: false`; and what
// that state does to a new request's input: `previous_response_id` prepends the stored
// conversation, `item_reference` items become the stored items they name, and reasoning items'
// `encrypted_content` (sealed by this server: sealer.h) opens back into their text.
#pragma once

#include <chrono>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "server/api_error.h"
#include "server/request_params.h"
#include "server/sealer.h"

namespace mx::server {

struct ResponseStoreLimits {
  size_t max_bytes = size_t(256) << 20;  // JSON text of all stored responses together; 0: store nothing
  int ttl_s = 3600;                      // a response is forgotten this long after it was stored
};

class ResponseStore {
 public:
  explicit ResponseStore(ResponseStoreLimits limits) : limits_(limits) {}

  // Stores a finished response; `items` is its whole conversation: the input items (after
  // expansion) and then its output items. Older responses are evicted to stay within the limits;
  // one larger than the whole budget is not stored.
  void put(const std::string& id, Json response, Json items);
  std::optional<Json> response(const std::string& id);
  bool erase(const std::string& id);
  size_t size();

  // Rewrites body["input"] into the full list of items the prompt is rendered from (see above).
  // 400s: an unknown previous_response_id, an unknown message or call reference (an unknown
  // reasoning reference is dropped), encrypted_content this server did not seal.
  std::optional<ApiError> expand_input(Json& body);

  const Sealer& sealer() const { return sealer_; }

 private:
  using Clock = std::chrono::steady_clock;
  struct Entry {
    Json response, items;
    size_t bytes = 0;
    Clock::time_point stored;
  };
  void evict_locked(size_t need);
  void drop_locked(const std::string& id);

  ResponseStoreLimits limits_;
  Sealer sealer_;
  std::mutex mu_;
  std::unordered_map<std::string, Entry> entries_;
  std::deque<std::string> order_;                             // ids, oldest first (may hold erased ones)
  std::unordered_map<std::string, std::string> item_owner_;  // item id -> the response that holds it
  size_t bytes_ = 0;
};

}  // namespace mx::server
