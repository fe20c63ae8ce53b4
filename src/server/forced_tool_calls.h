// tool_choice "required" or a named function: the output is constrained (token masks) to a JSON schema
// built from the tools, and read back as that JSON rather than in the model family's own call format (as
// vLLM does):
//   named function: the output is the function's arguments object -> one call, whose arguments stream as
//                   they are generated (the constraint guarantees they end up a valid object);
//   required:       the output is [{"name": ..., "parameters": {...}}, ...] -> one call per element,
//                   released when the element closes.
// Text that does not parse (an output cut short by max_tokens) is returned as content, as the family
// parsers do.
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "server/tool_parser.h"

namespace aerie::server {

// The schema of the named function's arguments: its `parameters` (any JSON object when it has none).
nlohmann::ordered_json named_call_schema(const nlohmann::ordered_json& tools, const std::string& name);
// The schema of a call list: an array of at least one {"name": const, "parameters": schema} object, one
// alternative per tool; at most one element when parallel tool calls are off.
nlohmann::ordered_json call_list_schema(const nlohmann::ordered_json& tools, bool parallel_tool_calls);

std::unique_ptr<ToolCallParser> make_named_call_parser(std::string name, uint64_t seed);
std::unique_ptr<ToolCallParser> make_call_list_parser(uint64_t seed);

}  // namespace aerie::server
