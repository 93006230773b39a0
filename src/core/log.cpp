// Log sink and progress bar.
#include "core/log.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <mutex>
#include <string_view>

namespace mx {
namespace {

LogLevel initial_level() {
  const char* env = std::getenv("MXSERVE_LOG");
  if (!env) return LogLevel::Info;
  std::string_view v(env);
  if (v == "debug") return LogLevel::Debug;
  if (v == "warn") return LogLevel::Warn;
  if (v == "error") return LogLevel::Error;
  return LogLevel::Info;
}

LogLevel& level_ref() {
  static LogLevel level = initial_level();
  return level;
}

std::mutex& log_mutex() {
  static std::mutex m;
  return m;
}

}  // namespace

void set_log_level(LogLevel level) { level_ref() = level; }

void log_write(LogLevel level, const std::string& message) {
  if (level < level_ref()) return;
  static constexpr const char* kNames[] = {"DEBUG", "INFO", "WARNING", "ERROR"};
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%m-%d %H:%M:%S", &tm);
  std::lock_guard lock(log_mutex());
  std::fprintf(stderr, "%s %s %s\n", kNames[int(level)], stamp, message.c_str());
}

Progress::Progress(std::string label, uint64_t total, std::string unit)
    : label_(std::move(label)), unit_(std::move(unit)), total_(total ? total : 1),
      tty_(isatty(STDERR_FILENO)), start_(std::chrono::steady_clock::now()) {
  draw(true);
}

Progress::~Progress() { finish(); }

void Progress::advance(uint64_t n) {
  done_ = std::min(total_, done_ + n);
  draw(false);
}

void Progress::finish() {
  if (finished_) return;
  done_ = total_;
  draw(true);
  finished_ = true;
  if (tty_) std::fputc('\n', stderr);
}

void Progress::draw(bool force) {
  const auto now = std::chrono::steady_clock::now();
  const double frac = double(done_) / double(total_);
  if (!tty_) {
    const int quarter = int(frac * 4);  // a line at 0%, 25%, 50%, 75%, 100%
    if (quarter == last_decile_) return;
    last_decile_ = quarter;
    std::lock_guard lock(log_mutex());
    std::fprintf(stderr, "%s: %3d%%\n", label_.c_str(), quarter * 25);
    return;
  }
  if (!force && now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  const double secs = std::chrono::duration<double>(now - start_).count();
  constexpr int kWidth = 30;
  const int filled = int(frac * kWidth);
  std::string bar(size_t(filled), '#');
  bar.resize(kWidth, '.');
  std::lock_guard lock(log_mutex());
  std::fprintf(stderr, "\r%s [%s] %3.0f%% %.1fs", label_.c_str(), bar.c_str(), frac * 100, secs);
  std::fflush(stderr);
}

}  // namespace mx
