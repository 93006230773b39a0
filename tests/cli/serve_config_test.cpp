// `mxserve serve --config FILE.yaml`: the file's `name: value` lines reach the flag parser (a bad
// value is reported against its flag), malformed lines and missing files are clear errors.
#include <gtest/gtest.h>

#include <fstream>

#include "test_util.h"

namespace mx {
namespace {

std::pair<int, std::string> serve_with(const std::string& yaml) {
  const auto path = test::temp_dir("yaml") / "serve.yaml";
  std::ofstream(path) << yaml;
  return test::run_command(test::mxserve_binary().string() + " serve --config " + path.string());
}

TEST(ServeConfig, ValuesReachTheFlagParser) {
  const auto [code, out] = serve_with("# comment\nhost: 127.0.0.1\nport: not-a-port\n");
  EXPECT_NE(code, 0) << out;
  EXPECT_NE(out.find("--port"), std::string::npos) << out;
  const auto [code2, out2] = serve_with("max_num_seqs: 0\n");  // underscores work too; 0 is out of range
  EXPECT_NE(code2, 0) << out2;
  EXPECT_NE(out2.find("not in range 1 to 4096"), std::string::npos) << out2;  // --parallel/--max-num-seqs
}

TEST(ServeConfig, MalformedFileIsAClearError) {
  const auto [code, out] = serve_with("port 8000\n");
  EXPECT_EQ(code, 2) << out;
  EXPECT_NE(out.find("expected `name: value`"), std::string::npos) << out;
  const auto [code2, out2] = test::run_command(test::mxserve_binary().string() + " serve --config /no/such.yaml");
  EXPECT_EQ(code2, 2) << out2;
  EXPECT_NE(out2.find("cannot open /no/such.yaml"), std::string::npos) << out2;
}

}  // namespace
}  // namespace mx
