// Logging to stderr ("INFO 11-22 03:50:01 message"), and a terminal progress bar that
// redraws in place on a TTY and prints a few milestone lines otherwise.
#pragma once

#include <fmt/format.h>

#include <chrono>
#include <cstdint>
#include <string>

namespace mx {

enum class LogLevel { Debug, Info, Warn, Error };

void log_write(LogLevel level, const std::string& message);
void set_log_level(LogLevel level);  // default Info; MXSERVE_LOG=debug|info|warn|error

template <typename... A>
void log_info(fmt::format_string<A...> f, A&&... a) { log_write(LogLevel::Info, fmt::format(f, std::forward<A>(a)...)); }
template <typename... A>
void log_warn(fmt::format_string<A...> f, A&&... a) { log_write(LogLevel::Warn, fmt::format(f, std::forward<A>(a)...)); }
template <typename... A>
void log_error(fmt::format_string<A...> f, A&&... a) { log_write(LogLevel::Error, fmt::format(f, std::forward<A>(a)...)); }
template <typename... A>
void log_debug(fmt::format_string<A...> f, A&&... a) { log_write(LogLevel::Debug, fmt::format(f, std::forward<A>(a)...)); }

class Progress {
 public:
  Progress(std::string label, uint64_t total, std::string unit = "");
  ~Progress();
  void advance(uint64_t n);
  void finish();

 private:
  void draw(bool force);
  std::string label_, unit_;
  uint64_t total_, done_ = 0;
  bool tty_, finished_ = false;
  int last_decile_ = -1;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

}  // namespace mx
