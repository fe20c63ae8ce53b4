#include "server/forced_tool_calls.h"

#include "core/json_scan.h"

namespace aerie::server {
namespace {

using Json = nlohmann::ordered_json;

bool is_json_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

const Json* find_tool(const Json& tools, const std::string& name) {
  for (const Json& tool : tools)
    if (tool["function"]["name"] == name) return &tool;
  return nullptr;
}

Json parameters_of(const Json& tool) {
  const Json& function = tool["function"];
  if (function.contains("parameters") && function["parameters"].is_object()) return function["parameters"];
  return Json{{"type", "object"}};
}

// The output is the named function's arguments: streamed as generated, without the whitespace before the
// object or after it.
class NamedCallParser final : public ToolCallParser {
 public:
  NamedCallParser(std::string name, uint64_t seed) : ToolCallParser(seed), name_(std::move(name)) {}

  void push(std::string_view text, std::vector<ToolEvent>& out) override {
    std::string fragment;
    for (char c : text) {
      if (is_json_space(c)) {
        if (index_ >= 0) space_ += c;  // held: it may be trailing
        continue;
      }
      if (index_ < 0) index_ = begin_call(name_, out);
      fragment += space_;
      space_.clear();
      fragment += c;
    }
    if (!fragment.empty()) out.push_back(ToolEvent::call_arguments(index_, std::move(fragment)));
  }
  void finish(std::vector<ToolEvent>&) override { space_.clear(); }

 private:
  std::string name_;
  std::string space_;
  int index_ = -1;
};

// The output is a JSON array of {"name", "parameters"} objects: each element becomes a call when it
// closes. Anything that does not fit (no constraint, or an output cut short) becomes content.
class CallListParser final : public ToolCallParser {
 public:
  explicit CallListParser(uint64_t seed) : ToolCallParser(seed) {}

  void push(std::string_view text, std::vector<ToolEvent>& out) override {
    for (size_t i = 0; i < text.size(); ++i) {
      if (broken_) {
        emit_text(text.substr(i), out);
        return;
      }
      const char c = text[i];
      if (depth_ >= 2) {  // inside an element
        element_ += c;
        if (in_string_) {
          if (escaped_) escaped_ = false;
          else if (c == '\\') escaped_ = true;
          else if (c == '"') in_string_ = false;
        } else if (c == '"') {
          in_string_ = true;
        } else if (c == '{' || c == '[') {
          ++depth_;
        } else if ((c == '}' || c == ']') && --depth_ == 1) {
          close_element(out);
        }
        continue;
      }
      syntax_ += c;
      if (is_json_space(c)) continue;
      if (depth_ == 0 && c == '[') {
        depth_ = 1;
      } else if (depth_ == 1 && c == '{') {
        depth_ = 2;
        element_.assign(1, '{');
      } else if (depth_ == 1 && (c == ',' || c == ']')) {
        if (c == ']') depth_ = -1;  // the list is closed: anything after it is content
      } else {
        broken_ = true;  // not a call list: what is held, and the rest, is content
        emit_text(syntax_, out);
        syntax_.clear();
        element_.clear();
        emit_text(text.substr(i + 1), out);
        return;
      }
    }
  }

  void finish(std::vector<ToolEvent>& out) override {
    if (depth_ >= 2) emit_text(element_, out);  // an element cut short
    element_.clear();
  }

 private:
  void close_element(std::vector<ToolEvent>& out) {
    // The model's output nests as deep as it likes (an any-object schema does not bound it), and dump()
    // recurses: an element beyond the request limits' depth stays text.
    if (scan_json_limits(element_, JsonLimits{})) {
      emit_text(element_, out);
      element_.clear();
      syntax_.clear();
      return;
    }
    const Json value = Json::parse(element_, nullptr, /*allow_exceptions=*/false);
    std::optional<std::string> arguments;
    if (value.is_object() && value.contains("name") && value["name"].is_string() && value.contains("parameters")) {
      arguments = arguments_from_value(value["parameters"]);
    }
    if (arguments) emit_call(value["name"].get<std::string>(), *arguments, out);
    else emit_text(element_, out);
    element_.clear();
    syntax_.clear();
  }

  std::string element_;  // the element being read
  std::string syntax_;   // brackets, commas and spaces since the last element (content if the list breaks)
  int depth_ = 0;        // 0 before '[', 1 in the list, >= 2 in an element, -1 after ']'
  bool in_string_ = false;
  bool escaped_ = false;
  bool broken_ = false;
};

}  // namespace

Json named_call_schema(const Json& tools, const std::string& name) {
  const Json* tool = find_tool(tools, name);
  return tool ? parameters_of(*tool) : Json{{"type", "object"}};
}

Json call_list_schema(const Json& tools, bool parallel_tool_calls) {
  Json alternatives = Json::array();
  for (const Json& tool : tools) {
    alternatives.push_back({{"type", "object"},
                            {"properties", {{"name", {{"type", "string"}, {"enum", {tool["function"]["name"]}}}},
                                            {"parameters", parameters_of(tool)}}},
                            {"required", {"name", "parameters"}},
                            {"additionalProperties", false}});
  }
  Json schema = {{"type", "array"}, {"minItems", 1}, {"items", {{"anyOf", std::move(alternatives)}}}};
  if (!parallel_tool_calls) schema["maxItems"] = 1;
  return schema;
}

std::unique_ptr<ToolCallParser> make_named_call_parser(std::string name, uint64_t seed) {
  return std::make_unique<NamedCallParser>(std::move(name), seed);
}

std::unique_ptr<ToolCallParser> make_call_list_parser(uint64_t seed) { return std::make_unique<CallListParser>(seed); }

}  // namespace aerie::server
