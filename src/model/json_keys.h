// Typed reads of config.json keys (the target's and a draft's): type and range errors name the key.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace mx {

// Reads j[key] into out when present; type errors name the key. An integer key takes an
// integer, or a float with an integral value, within T's range (a cast out of range is undefined).
template <typename T>
inline Status read_key(const nlohmann::json& j, const char* key, T& out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return ok_status();
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    if (it->is_number()) {
      using L = std::numeric_limits<T>;
      bool fits = false;
      if (it->is_number_unsigned()) {
        fits = it->get<uint64_t>() <= uint64_t(L::max());
      } else if (it->is_number_integer()) {
        const int64_t x = it->get<int64_t>();
        fits = std::is_signed_v<T> ? x >= int64_t(L::min()) && x <= int64_t(L::max()) : x >= 0 && uint64_t(x) <= uint64_t(L::max());
      } else {
        const double v = it->get<double>();
        fits = std::floor(v) == v && v >= double(L::min()) && v < double(L::max()) + 1.0;
      }
      MX_CHECK(fits, "config.json: key '{}' must be an integer in [{}, {}], not {}", key, L::min(), L::max(), it->dump());
      out = it->is_number_integer() ? it->get<T>() : T(it->get<double>());
      return ok_status();
    }
  }
  try {
    out = it->get<T>();
  } catch (const nlohmann::json::exception& e) {
    return MX_ERROR("config.json: key '{}' has the wrong type ({})", key, it->type_name());
  }
  return ok_status();
}

template <typename T>
inline Status require_key(const nlohmann::json& j, const char* key, T& out) {
  MX_CHECK(j.contains(key) && !j[key].is_null(), "config.json: required key '{}' is missing", key);
  return read_key(j, key, out);
}

}  // namespace mx
