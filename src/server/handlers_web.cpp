// GET /, GET /dashboard and GET /assets/...: the chat page, the operator view and the files they
// load, all embedded in the binary (web_assets.h); nothing is fetched from elsewhere at run time.
#include <fmt/format.h>

#include <map>

#include "server/handlers.h"
#include "server/web_assets.h"

namespace mx::server {
namespace {

// FNV-1a of the bytes: the ETag, so a reload revalidates (304) instead of downloading again.
std::string etag_of(std::string_view bytes) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : bytes) h = (h ^ c) * 1099511628211ull;
  return fmt::format("\"{:016x}\"", h);
}

}  // namespace

const WebAsset* find_web_asset(std::string_view path) {
  static const std::map<std::string_view, const WebAsset*> by_path = [] {
    std::map<std::string_view, const WebAsset*> m;
    for (const WebAsset& a : web_assets()) m[a.path] = &a;
    return m;
  }();
  if (path == "/") path = "/assets/chat.html";
  if (path == "/dashboard") path = "/assets/dashboard.html";
  const auto it = by_path.find(path);
  return it == by_path.end() ? nullptr : it->second;
}

void handle_web_asset(ServerContext&, const httplib::Request& req, httplib::Response& res) {
  const WebAsset* a = find_web_asset(req.path);
  if (!a) return send_error(res, {.status = 404, .message = "Not found: " + req.method + " " + req.path});
  static const std::map<const WebAsset*, std::string> etags = [] {
    std::map<const WebAsset*, std::string> m;
    for (const WebAsset& x : web_assets()) m[&x] = etag_of(x.bytes);
    return m;
  }();
  const std::string& etag = etags.at(a);
  res.set_header("ETag", etag);
  res.set_header("Cache-Control", "no-cache");  // revalidate: a new binary serves new pages at once
  res.set_header("X-Content-Type-Options", "nosniff");
  if (req.get_header_value("If-None-Match") == etag) {
    res.status = 304;
    return;
  }
  res.set_content(a->bytes.data(), a->bytes.size(), std::string(a->content_type));
}

}  // namespace mx::server
