#include <gtest/gtest.h>

#include "cli/args.h"
#include "core/error.h"

namespace aerie::cli {
namespace {

const std::vector<OptionSpec> kSpecs = {
    {"--model", true, ""}, {"--ids", true, ""}, {"--temperature", true, ""}, {"--json", false, ""}};

TEST(Args, ParsesValuesFlagsAndEqualsForm) {
  const Args args({"--model", "dir", "--ids=1,2,3", "--json", "--temperature", "0.5"}, kSpecs);
  EXPECT_EQ(args.required("--model"), "dir");
  EXPECT_EQ(args.integers("--ids"), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_TRUE(args.has("--json"));
  EXPECT_DOUBLE_EQ(args.number("--temperature", 0), 0.5);
  EXPECT_EQ(args.integer("--max", 7), 7);
}

TEST(Args, ErrorsNameTheOption) {
  auto message = [](const std::vector<std::string>& argv, const std::string& query = "") -> std::string {
    try {
      const Args args(argv, kSpecs);
      if (query == "--ids") args.integers(query);
      if (query == "--temperature") args.number(query, 0);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(message({"--modle", "x"}).find("unknown option '--modle'"), std::string::npos);
  EXPECT_NE(message({"--model"}).find("--model needs a value"), std::string::npos);
  EXPECT_NE(message({"--json=1"}).find("takes no value"), std::string::npos);
  EXPECT_NE(message({"--ids", "1,x"}, "--ids").find("comma-separated integers"), std::string::npos);
  EXPECT_NE(message({"--temperature", "hot"}, "--temperature").find("expects a number"), std::string::npos);
  EXPECT_THROW(Args({}, kSpecs).required("--model"), Error);
}

TEST(Args, MultipleValuesRunToTheNextOptionAndAccumulate) {
  OptionSpec modules("--lora-modules", true, "");
  modules.multiple = true;
  std::vector<OptionSpec> specs = kSpecs;
  specs.push_back(modules);
  // vLLM's form: several values after one flag, and the flag again later; the "=" form counts as one value.
  const Args args({"--lora-modules", "a=/x", "b=/y", "--json", "--lora-modules=c=/z", R"({"name": "d", "path": "/w"})",
                   "--model", "m"},
                  specs);
  EXPECT_EQ(args.all("--lora-modules"),
            (std::vector<std::string>{"a=/x", "b=/y", "c=/z", R"({"name": "d", "path": "/w"})"}));
  EXPECT_TRUE(args.has("--json"));
  EXPECT_EQ(args.required("--model"), "m");
  EXPECT_TRUE(Args({"--json"}, specs).all("--lora-modules").empty());
  EXPECT_THROW(Args({"--lora-modules"}, specs), Error);
}

TEST(Args, NumberLists) {
  const Args args({"--temperature", "0,0.7,1"}, kSpecs);
  EXPECT_EQ(args.numbers("--temperature", "1"), (std::vector<double>{0.0, 0.7, 1.0}));
  EXPECT_EQ(Args({}, kSpecs).numbers("--temperature", "0,1"), (std::vector<double>{0.0, 1.0}));
  EXPECT_THROW(parse_number_list("0,,1", "--t"), Error);
  EXPECT_THROW(parse_number_list("0,x", "--t"), Error);
  EXPECT_THROW(parse_number_list("", "--t"), Error);
}

}  // namespace
}  // namespace aerie::cli
