// The files of the web pages (src/server/web) and their libraries, embedded at build time by
// src/server/web/assets.cmake: looked up by URL path, served with an ETag by handle_web_asset.
#pragma once

#include <span>
#include <string_view>

namespace mx::server {

struct WebAsset {
  std::string_view path;          // "/assets/chat.js"
  std::string_view content_type;  // "text/javascript; charset=utf-8"
  std::string_view bytes;
};

// Every embedded asset (generated web_assets_data.cpp).
std::span<const WebAsset> web_assets();
// The asset served at `path` ("/" is chat.html, "/dashboard" dashboard.html), or null.
const WebAsset* find_web_asset(std::string_view path);

}  // namespace mx::server
