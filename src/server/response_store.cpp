// ResponseStore (response_store.h).
#include "server/response_store.h"

namespace mx::server {
namespace {

ApiError not_found_400(std::string message, std::string param, std::string code) {
  ApiError e = bad_request(std::move(message), std::move(param));
  e.code = std::move(code);
  return e;
}

}  // namespace

void ResponseStore::drop_locked(const std::string& id) {
  auto it = entries_.find(id);
  if (it == entries_.end()) return;
  for (const Json& item : it->second.items)
    if (item.is_object() && item.contains("id") && item["id"].is_string()) {
      auto owner = item_owner_.find(item["id"].get<std::string>());
      if (owner != item_owner_.end() && owner->second == id) item_owner_.erase(owner);
    }
  bytes_ -= it->second.bytes;
  entries_.erase(it);
}

void ResponseStore::evict_locked(size_t need) {
  const auto now = Clock::now();
  while (!order_.empty()) {
    const auto it = entries_.find(order_.front());
    const bool gone = it == entries_.end();
    const bool expired = !gone && now - it->second.stored > std::chrono::seconds(limits_.ttl_s);
    if (!gone && !expired && bytes_ + need <= limits_.max_bytes) break;
    if (!gone) drop_locked(order_.front());
    order_.pop_front();
  }
}

void ResponseStore::put(const std::string& id, Json response, Json items) {
  const size_t bytes = response.dump().size() + items.dump().size() + id.size();
  std::lock_guard lock(mu_);
  if (bytes > limits_.max_bytes) return;
  drop_locked(id);
  evict_locked(bytes);
  for (const Json& item : items)
    if (item.is_object() && item.contains("id") && item["id"].is_string()) item_owner_[item["id"].get<std::string>()] = id;
  entries_[id] = Entry{.response = std::move(response), .items = std::move(items), .bytes = bytes, .stored = Clock::now()};
  order_.push_back(id);
  bytes_ += bytes;
}

std::optional<Json> ResponseStore::response(const std::string& id) {
  std::lock_guard lock(mu_);
  evict_locked(0);
  const auto it = entries_.find(id);
  if (it == entries_.end()) return std::nullopt;
  return it->second.response;
}

bool ResponseStore::erase(const std::string& id) {
  std::lock_guard lock(mu_);
  const bool found = entries_.contains(id);
  drop_locked(id);
  return found;
}

size_t ResponseStore::size() {
  std::lock_guard lock(mu_);
  evict_locked(0);
  return entries_.size();
}

std::optional<ApiError> ResponseStore::expand_input(Json& body) {
  Json items = Json::array();
  std::unique_lock lock(mu_);
  evict_locked(0);
  if (auto prev = body.find("previous_response_id"); prev != body.end() && !prev->is_null()) {
    if (!prev->is_string()) return bad_request("'previous_response_id' must be a string", "previous_response_id");
    const auto it = entries_.find(prev->get<std::string>());
    if (it == entries_.end())
      return not_found_400("Previous response with id '" + prev->get<std::string>() +
                               "' not found (never stored, stored with store: false, deleted, or expired).",
                           "previous_response_id", "previous_response_not_found");
    items = it->second.items;
  }
  auto in = body.find("input");
  if (in == body.end() || in->is_null()) {
    body["input"] = std::move(items);  // input_to_messages names a missing input
    if (body["input"].empty()) body.erase("input");
    return std::nullopt;
  }
  if (in->is_string()) {
    items.push_back({{"type", "message"}, {"role", "user"}, {"content", *in}});
    body["input"] = std::move(items);
    return std::nullopt;
  }
  if (!in->is_array()) return std::nullopt;  // input_to_messages gives the 400
  for (size_t i = 0; i < in->size(); ++i) {
    Json item = (*in)[i];
    const std::string where = "input[" + std::to_string(i) + "]";
    const auto type = item.is_object() ? item.find("type") : item.end();
    const std::string t = item.is_object() && type != item.end() && type->is_string() ? type->get<std::string>() : "";
    if (t == "item_reference") {
      const auto id = item.find("id");
      if (id == item.end() || !id->is_string()) return bad_request("'" + where + ".id' must be a string", "input");
      const std::string ref = id->get<std::string>();
      const auto owner = item_owner_.find(ref);
      const Json* found = nullptr;
      if (owner != item_owner_.end())
        for (const Json& stored : entries_.at(owner->second).items)
          if (stored.is_object() && stored.contains("id") && stored["id"] == ref) found = &stored;
      if (found) {
        items.push_back(*found);
      } else if (!ref.starts_with("rs_")) {  // a reasoning item may be gone: the prompt drops old reasoning anyway
        return not_found_400("Item with id '" + ref + "' not found (" + where + ").", "input", "item_not_found");
      }
      continue;
    }
    if (t == "reasoning") {
      if (auto enc = item.find("encrypted_content"); enc != item.end() && !enc->is_null()) {
        const auto text = enc->is_string() ? sealer_.open(enc->get<std::string>()) : std::nullopt;
        if (!text)
          return bad_request("'" + where + ".encrypted_content' was not sealed by this server (altered, or from "
                             "another server or an earlier run of it)", "input");
        item["content"] = Json::array({{{"type", "reasoning_text"}, {"text", *text}}});
        item.erase("encrypted_content");
      }
    }
    items.push_back(std::move(item));
  }
  body["input"] = std::move(items);
  return std::nullopt;
}

}  // namespace mx::server
