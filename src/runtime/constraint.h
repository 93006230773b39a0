// TokenConstraint: a per-request rule on the tokens a sequence may draw (guided decoding: a JSON
// grammar, a forced tool call, a reasoning budget). The engine asks it for each draw's mask and
// tells it each token read; implementations live above the runtime (grammar/).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

namespace mx {

class TokenConstraint {
 public:
  virtual ~TokenConstraint() = default;
  // The next draw may be planned while `pending` drawn tokens are not read yet (they cannot
  // change its mask, or the one token that must follow them is forced: accept() puts it in).
  virtual bool can_run_ahead(int pending) const = 0;
  // The ids the next draw may take, as bits over the model's vocabulary ((V + 31) / 32 words);
  // valid until the next accept(). Only called when can_run_ahead(pending) holds. The engine asks
  // the constraints of different sequences at once, on several threads (one object on one thread
  // at a time): state shared between objects must be read-only, locked or thread-local.
  virtual const std::vector<uint32_t>& next_mask(int pending) = 0;
  // A drawn token, read: returns it, or the id the rule forced in its place (it was drawn ahead
  // under an older mask); -1 when the rule allows nothing (the request ends with an error).
  virtual int32_t accept(int32_t token) = 0;
  // The same rule from its start (another choice of the same request).
  virtual std::unique_ptr<TokenConstraint> fresh() const = 0;
};

}  // namespace mx
