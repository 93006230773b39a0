// Implementation of the shared test helpers.
#include "test_util.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sys/wait.h>
#include <unistd.h>

namespace mx::test {

std::filesystem::path source_dir() {
  if (const char* env = std::getenv("MXSERVE_SOURCE_DIR")) return env;
  return std::filesystem::path(__FILE__).parent_path().parent_path();
}

std::filesystem::path fixtures_dir() { return source_dir() / "tests" / "fixtures"; }

std::filesystem::path temp_dir(const std::string& name) {
  static int counter = 0;
  auto dir = std::filesystem::temp_directory_path() /
             ("mxserve_test_" + std::to_string(::getpid()) + "_" + name + "_" + std::to_string(counter++));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

std::filesystem::path mxserve_binary() {
  if (const char* env = std::getenv("MXSERVE_BINARY")) return env;
  // Test binaries live in <build>/tests/, the CLI in <build>/.
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec && std::filesystem::exists(self.parent_path().parent_path() / "mxserve"))
    return self.parent_path().parent_path() / "mxserve";
  return source_dir() / "build" / "mxserve";
}

std::pair<int, std::string> run_command(const std::string& cmd) {
  std::string out;
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return {-1, "popen failed"};
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int status = ::pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

std::vector<float> random_floats(size_t n, uint64_t seed, float lo, float hi) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

double max_rel_error(std::span<const float> got, std::span<const float> ref) {
  double max_err = 0, max_ref = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double e = std::isnan(got[i]) ? INFINITY : std::abs(double(got[i]) - ref[i]);
    max_err = std::max(max_err, e);
    max_ref = std::max(max_ref, std::abs(double(ref[i])));
  }
  return max_ref > 0 ? max_err / max_ref : max_err;
}

double nmse(std::span<const float> got, std::span<const float> ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double d = double(got[i]) - ref[i];
    num += std::isnan(d) ? INFINITY : d * d;
    den += double(ref[i]) * ref[i];
  }
  return den > 0 ? num / den : num;
}

::testing::AssertionResult all_close(std::span<const float> got, std::span<const float> ref, double atol,
                                     double rtol) {
  if (got.size() != ref.size())
    return ::testing::AssertionFailure() << "size " << got.size() << " != " << ref.size();
  for (size_t i = 0; i < ref.size(); ++i) {
    const double d = std::abs(double(got[i]) - ref[i]);
    if (!(d <= atol + rtol * std::abs(double(ref[i]))))
      return ::testing::AssertionFailure() << "index " << i << ": got " << got[i] << " ref " << ref[i]
                                           << " (|diff| " << d << ")";
  }
  return ::testing::AssertionSuccess();
}

}  // namespace mx::test
