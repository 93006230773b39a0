// Status and Result<T>: errors that carry their source location and travel up to main / the server.
// MX_CHECK(cond, fmt, ...) returns a Status from the enclosing function; MX_TRY propagates one.
#pragma once

#include <fmt/format.h>

#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace mx {

class Status {
 public:
  Status() = default;  // ok
  static Status error(std::string message) { return Status(std::move(message)); }

  bool ok() const { return !message_.has_value(); }
  const std::string& message() const {
    static const std::string kOk = "ok";
    return message_ ? *message_ : kOk;
  }
  // Adds outer context in front: "loading model: <inner message>".
  Status with_context(const std::string& context) const {
    return ok() ? *this : Status(context + ": " + *message_);
  }

 private:
  explicit Status(std::string message) : message_(std::move(message)) {}
  std::optional<std::string> message_;
};

inline Status ok_status() { return Status(); }

// A value or an error.
template <typename T>
class Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {}  // NOLINT: implicit by design

  bool ok() const { return std::holds_alternative<T>(v_); }
  Status status() const { return ok() ? Status() : std::get<Status>(v_); }
  T& value() & { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  const T& value() const& { return std::get<T>(v_); }
  T* operator->() { return &value(); }
  T& operator*() { return value(); }

 private:
  std::variant<T, Status> v_;
};

namespace detail {
inline std::string short_file(const char* path) {
  std::string p(path);
  auto pos = p.rfind("/src/");
  if (pos == std::string::npos) pos = p.rfind("/tests/");
  return pos == std::string::npos ? p : p.substr(pos + 1);
}
}  // namespace detail

}  // namespace mx

#define MX_ERROR(...)                                                                         \
  ::mx::Status::error(fmt::format("{} ({}:{})", fmt::format(__VA_ARGS__),                     \
                                  ::mx::detail::short_file(__FILE__), __LINE__))

#define MX_CHECK(cond, ...)                 \
  do {                                      \
    if (!(cond)) return MX_ERROR(__VA_ARGS__); \
  } while (0)

#define MX_CONCAT_INNER(a, b) a##b
#define MX_CONCAT(a, b) MX_CONCAT_INNER(a, b)

// MX_TRY(expr): expr yields a Status; return it if not ok.
#define MX_TRY(expr)                      \
  do {                                    \
    ::mx::Status _mx_st = (expr);         \
    if (!_mx_st.ok()) return _mx_st;      \
  } while (0)

// MX_ASSIGN(lhs, expr): expr yields a Result<T>; on error return it, else move the value into lhs.
// It expands to several statements: inside an if/else, use braces.
#define MX_ASSIGN(lhs, expr) MX_ASSIGN_IMPL(MX_CONCAT(_mx_res_, __COUNTER__), lhs, expr)
#define MX_ASSIGN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                   \
  if (!tmp.ok()) return tmp.status();  \
  lhs = std::move(tmp).value()
