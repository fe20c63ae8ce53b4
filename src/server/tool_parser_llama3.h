// Llama 3.1 / 3.2 JSON tool calls (vLLM's llama3_json):
//
//   [<|python_tag|>]{"name": "NAME", "parameters": {ARGS}}[; {"name": ...}]...
//
// Source: the meta-llama 3.1 and 3.2 chat templates, which ask for 'the format {"name": function name,
// "parameters": dictionary of argument name and its value}' and write a call back as
// '{"name": "' + name + '", "parameters": ' + arguments | tojson + '}', and vLLM's llama3_json parser
// (calls separated by ';', "arguments" accepted for "parameters", optional leading <|python_tag|>).
//
// The message is a tool-call message when, after leading whitespace, it starts with '{' or <|python_tag|>;
// elsewhere <|python_tag|> also starts the calls (the text before it is content). Calls are JSON objects
// separated by ';' and/or whitespace. The first object that is not a call ({"name": string, "parameters" or
// "arguments": object}) is content verbatim, as is the text after it (where only a later <|python_tag|>
// starts calls again); so is an object cut off by the end of
// generation. Text after the last call is content.
#pragma once

#include <string>

#include "server/tool_parser.h"

namespace aerie::server {

class Llama3JsonToolParser final : public ToolCallParser {
 public:
  explicit Llama3JsonToolParser(uint64_t seed) : ToolCallParser(seed) {}

  void push(std::string_view text_delta, std::vector<ToolEvent>& out) override;
  void finish(std::vector<ToolEvent>& out) override;

 private:
  enum class State { kStart, kContent, kCalls, kObject };

  bool step_start(std::vector<ToolEvent>& out);
  bool step_content(std::vector<ToolEvent>& out);
  bool step_calls(std::vector<ToolEvent>& out);
  bool step_object(std::vector<ToolEvent>& out);

  State state_ = State::kStart;
  HeldText buffer_;
  // The JSON scanner over the object at the front of buffer_ (kObject): bytes scanned, nesting depth,
  // inside a string, after a backslash in a string.
  size_t scanned_ = 0;
  int depth_ = 0;
  bool in_string_ = false;
  bool escaped_ = false;
};

}  // namespace aerie::server
