// Hostile OpenAI request bodies (issue 17): JSON nested thousands deep in any field, objects with 100k
// keys, numbers no double or int64 holds, and fields whose count or size is unbounded are each a 400 with
// OpenAI's error object naming the field, never a crash, a 500 or seconds of CPU.
#include "server/openai_schema.h"

#include <gtest/gtest.h>

#include "server/openai_fields.h"

#include <chrono>
#include <string>

namespace aerie::server {
namespace {

const std::string kUser = R"({"role": "user", "content": "Hi"})";

// Runs `parse` and returns the ApiError it throws (a failure when it throws nothing or something else).
template <typename Parse>
ApiError error_of(Parse parse, const std::string& label) {
  try {
    parse();
  } catch (const ApiError& e) {
    return e;
  } catch (const std::exception& e) {
    ADD_FAILURE() << label << ": not an ApiError: " << e.what();
    return ApiError::internal(e.what());
  }
  ADD_FAILURE() << label << ": accepted";
  return ApiError::internal("accepted");
}

ApiError chat_error(const std::string& body) {
  return error_of([&] { parse_chat_request(body); }, body.substr(0, 160));
}

ApiError completion_error(const std::string& body) {
  return error_of([&] { parse_completion_request(body); }, body.substr(0, 160));
}

std::string nested(int depth) { return std::string(size_t(depth), '[') + std::string(size_t(depth), ']'); }

// A value nested 20000 deep in each field that takes free-form JSON. Before: SIGSEGV (the copy of the
// message, the schema compiler, dump() and the template's value conversion all recurse).
TEST(HostileRequest, DeepNestingIsRefusedInEveryField) {
  const std::string deep = nested(20000);
  struct Case {
    std::string body;
    std::string param_prefix;
  };
  const Case cases[] = {
      {R"({"messages": [{"role": "user", "content": "x", "extra": )" + deep + "}]}", "messages[0].extra"},
      {R"({"messages": [{"role": "user", "content": )" + deep + "}]}", "messages[0].content"},
      {R"({"messages": [)" + kUser + R"(], "chat_template_kwargs": {"x": )" + deep + "}}", "chat_template_kwargs.x"},
      {R"({"messages": [)" + kUser + R"(], "tools": [{"type": "function", "function": {"name": "f", "parameters": )"
           R"({"type": "object", "properties": {"a": )" + deep + "}}}}]}",
       "tools[0].function.parameters.properties.a"},
      {R"({"messages": [)" + kUser + R"(], "response_format": {"type": "json_schema", "json_schema": {"name": "x", )"
           R"("schema": {"items": )" + deep + "}}}}",
       "response_format.json_schema.schema.items"},
  };
  for (const Case& c : cases) {
    const ApiError e = chat_error(c.body);
    EXPECT_EQ(e.status(), 400);
    EXPECT_EQ(e.code(), "json_too_deep");
    EXPECT_EQ(e.param().substr(0, c.param_prefix.size()), c.param_prefix) << e.what();
    EXPECT_NE(std::string(e.what()).find("nested deeper than 128"), std::string::npos) << e.what();
  }
  // 128 levels in all are fine.
  EXPECT_NO_THROW(parse_chat_request(R"({"messages": [)" + kUser + R"(], "chat_template_kwargs": {"x": )" +
                                     nested(125) + "}}"));
}

// 100k keys in one object, 1.6 MB: before, 9-30 s of CPU (every ordered_json insert is linear).
TEST(HostileRequest, ObjectWithTooManyKeysIsRefusedQuickly) {
  std::string kwargs = "{";
  for (int i = 0; i < 100000; ++i) kwargs += (i ? ", \"key" : "\"key") + std::to_string(i) + "\": 0";
  kwargs += "}";
  const std::string body = R"({"messages": [)" + kUser + R"(], "chat_template_kwargs": )" + kwargs + "}";
  const auto start = std::chrono::steady_clock::now();
  const ApiError e = chat_error(body);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(e.status(), 400);
  EXPECT_EQ(e.param(), "chat_template_kwargs");
  EXPECT_EQ(e.code(), "json_too_many_keys");
  EXPECT_LT(seconds, 20.0);  // milliseconds in practice; the quadratic parse took minutes under ASan
}

// Within the key limit, an 8 MiB body of objects with 4096 keys each cost 4.3 s to parse (each member
// inserted after a linear search of the object so far); it is one linear pass now.
TEST(HostileRequest, WideObjectsWithinTheLimitParseInLinearTime) {
  std::string body = R"({"messages": [)" + kUser + R"(], "chat_template_kwargs": {"x": [)";
  for (int object = 0; object < 230; ++object) {
    body += object ? ", {" : "{";
    for (int i = 0; i < 4096; ++i) body += (i ? ", \"" : "\"") + std::to_string(i) + "\": 0";
    body += "}";
  }
  body += "]}}";
  const auto start = std::chrono::steady_clock::now();
  const ChatRequest request = parse_chat_request(body);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(request.chat_template_kwargs["x"].size(), 230u);
  EXPECT_EQ(request.chat_template_kwargs["x"][229].size(), 4096u);
  EXPECT_LT(seconds, 20.0);  // ~0.3 s (2 s under ASan); quadratic insertion took 14 s, ~1 min under ASan
}

// The same document as nlohmann's own parser builds: member order, duplicate keys (first position, last
// value) in small and large objects, every value type.
TEST(HostileRequest, LinearParseMatchesNlohmann) {
  std::string wide = "{";
  for (int i = 0; i < 300; ++i) wide += (i ? ", \"k" : "\"k") + std::to_string(i % 250) + "\": " + std::to_string(i);
  wide += "}";
  for (const std::string& text : {
           std::string(R"({"b": 1, "a": [true, false, null, -3, 18446744073709551615, 1.5e-3, "x\u00e9\n"], "b": 2})"),
           std::string(R"({"z": {}, "y": [], "x": {"q": {"r": [{}]}}, "x": "again"})"),
           R"({"wide": )" + wide + "}",
       }) {
    EXPECT_EQ(fields::parse_body(text), nlohmann::ordered_json::parse(text)) << text.substr(0, 80);
    EXPECT_EQ(fields::parse_body(text).dump(), nlohmann::ordered_json::parse(text).dump());
  }
}

TEST(HostileRequest, NumbersOutOfRangeNameTheirField) {
  struct Case {
    std::string field, value, code;
  };
  const Case cases[] = {
      {"temperature", "1e400", "number_out_of_range"},
      {"top_p", "-1e400", "number_out_of_range"},
      {"max_tokens", "1e400", "number_out_of_range"},
      {"seed", "1" + std::string(400, '0'), "number_out_of_range"},
      // Integers beyond int64: a range error, not a wrong type and not a silent clamp.
      {"max_tokens", "9223372036854775808", "integer_above_max_value"},
      {"max_tokens", "18446744073709551616", "integer_above_max_value"},
      {"max_completion_tokens", "9223372036854775807", "integer_above_max_value"},
      {"seed", "-9223372036854775809", "integer_below_min_value"},
      {"n", "1e300", "integer_above_max_value"},
      {"top_k", "-1e30", "integer_below_min_value"},
      {"top_logprobs", "1e19", "integer_above_max_value"},
  };
  for (const Case& c : cases) {
    const std::string body = R"({"messages": [)" + kUser + R"(], "logprobs": true, ")" + c.field + "\": " + c.value + "}";
    const ApiError e = chat_error(body);
    EXPECT_EQ(e.status(), 400) << body;
    EXPECT_EQ(e.param(), c.field) << body << " -> " << e.what();
    EXPECT_EQ(e.code(), c.code) << body << " -> " << e.what();
  }
  const ApiError e = completion_error(R"({"prompt": "x", "max_tokens": 9223372036854775808})");
  EXPECT_EQ(e.param(), "max_tokens");
  EXPECT_EQ(e.code(), "integer_above_max_value");
}

TEST(HostileRequest, CountsAndSizesAreBounded) {
  std::string stops = "[";
  for (int i = 0; i < 17; ++i) stops += (i ? ", \"s" : "\"s") + std::to_string(i) + "\"";
  stops += "]";
  std::string tools = "[";
  for (int i = 0; i < 129; ++i) tools += std::string(i ? ", " : "") + R"({"type": "function", "function": {"name": "f)" + std::to_string(i) + "\"}}";
  tools += "]";
  struct Case {
    std::string body, param, code;
  };
  const std::string messages = R"({"messages": [)" + kUser + "], ";
  const Case chat_cases[] = {
      {messages + R"("stop": )" + stops + "}", "stop", "array_above_max_length"},
      {messages + R"("stop": ")" + std::string(1025, 'x') + "\"}", "stop", "string_above_max_length"},
      {messages + R"("stop": ["a", ")" + std::string(1025, 'x') + "\"]}", "stop[1]", "string_above_max_length"},
      {messages + R"("tools": )" + tools + "}", "tools", "array_above_max_length"},
  };
  for (const Case& c : chat_cases) {
    const ApiError e = chat_error(c.body);
    EXPECT_EQ(e.status(), 400) << c.body.substr(0, 100);
    EXPECT_EQ(e.param(), c.param) << e.what();
    EXPECT_EQ(e.code(), c.code) << e.what();
  }
  // n x prompts: every choice is a sequence in the engine.
  std::string prompts = "[";
  for (int i = 0; i < 200; ++i) prompts += i ? ", \"p\"" : "\"p\"";
  prompts += "]";
  const ApiError many = completion_error(R"({"prompt": )" + prompts + "}");
  EXPECT_EQ(many.param(), "prompt");
  EXPECT_EQ(many.code(), "too_many_choices");
  const ApiError times_n = completion_error(R"({"prompt": ["a", "b"], "n": 100})");
  EXPECT_EQ(times_n.param(), "n");
  EXPECT_EQ(times_n.code(), "too_many_choices");
  EXPECT_NO_THROW(parse_completion_request(R"({"prompt": ["a", "b"], "n": 64})"));
  EXPECT_NO_THROW(parse_chat_request(messages + R"("stop": ["a", "b", "c", "d", "e"]})"));
}

}  // namespace
}  // namespace aerie::server
