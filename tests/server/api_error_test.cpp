// Errors of the lower layers reach clients without source locations (#27 item 9) and name the
// request field they are about.
#include <gtest/gtest.h>

#include "server/api_error.h"

namespace mx::server {
namespace {

TEST(ApiError, LocationsAreStripped) {
  EXPECT_EQ(without_locations("tools[0] must be an object (src/tokenizer/openai_chat.cpp:51)"), "tools[0] must be an object");
  EXPECT_EQ(without_locations("outer (src/a.cpp:1): inner (tests/b.cpp:22)"), "outer: inner");
  EXPECT_EQ(without_locations("keeps (src/ alone) and (src/x.cpp:y)"), "keeps (src/ alone) and (src/x.cpp:y)");
  const std::string crafted(100000, '(');  // linear on text with many openings
  EXPECT_EQ(without_locations(" (src/" + crafted), " (src/" + crafted);
}

TEST(ApiError, ParamIsTheFieldTheMessageNames) {
  const Status tools = MX_ERROR("tools[3].function.name is required");
  const ApiError e = bad_request(tools, "messages");
  EXPECT_EQ(e.param, "tools");
  EXPECT_EQ(e.message, "tools[3].function.name is required");
  EXPECT_EQ(bad_request(MX_ERROR("tool_choice 'x' is not one of auto"), "messages").param, "tool_choice");
  EXPECT_EQ(bad_request(MX_ERROR("bad byte"), "prompt", {}).param, "prompt");
  EXPECT_FALSE(bad_request(MX_ERROR("no room"), "").param.has_value());
}

}  // namespace
}  // namespace mx::server
