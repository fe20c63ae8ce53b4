// set_limit: every request-side limit can be set by name, values are range-checked, and an unknown name is
// an error that lists the known ones.
#include <gtest/gtest.h>

#include "core/error.h"
#include "core/limits.h"

namespace aerie {
namespace {

TEST(Limits, SetByName) {
  RequestSideLimits limits;
  set_limit(limits, "json.max_depth=512");
  set_limit(limits, "http.max_body_bytes=1073741824");
  set_limit(limits, "chat_template.max_output_bytes=100");
  set_limit(limits, "request.max_tools=4096");
  EXPECT_EQ(limits.json.max_depth, 512);
  EXPECT_EQ(limits.http.max_body_bytes, size_t{1} << 30);
  EXPECT_EQ(limits.chat_template.max_output_bytes, 100u);
  EXPECT_EQ(limits.request.max_tools, 4096u);
  EXPECT_EQ(limits.schema.max_depth, SchemaLimits{}.max_depth);  // untouched
}

TEST(Limits, BadAssignmentsAreErrorsThatSayWhy) {
  RequestSideLimits limits;
  const auto message = [&](const char* assignment) {
    try {
      set_limit(limits, assignment);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message("json.max_dept=5").find("unknown limit 'json.max_dept'"), std::string::npos);
  EXPECT_NE(message("json.max_dept=5").find("json.max_depth"), std::string::npos) << "the known names are listed";
  EXPECT_NE(message("json.max_depth").find("NAME=VALUE"), std::string::npos);
  EXPECT_NE(message("json.max_depth=0").find("must be an integer in [1, 2147483647]"), std::string::npos);
  EXPECT_NE(message("json.max_depth=-3").find("must be an integer"), std::string::npos);
  EXPECT_NE(message("json.max_depth=1e3").find("must be an integer"), std::string::npos);
  EXPECT_NE(message("json.max_depth=99999999999").find("must be an integer"), std::string::npos);
  EXPECT_EQ(limits.json.max_depth, JsonLimits{}.max_depth) << "a refused assignment changes nothing";
}

TEST(Limits, DescribeListsEveryLimitWithItsValue) {
  const std::string text = describe_limits(RequestSideLimits{});
  EXPECT_NE(text.find("http.max_body_bytes = 8388608\n"), std::string::npos);
  EXPECT_NE(text.find("chat_template.max_loop_iterations = 1000000\n"), std::string::npos);
  EXPECT_NE(text.find("schema.max_nodes = 20000\n"), std::string::npos);
}

}  // namespace
}  // namespace aerie
