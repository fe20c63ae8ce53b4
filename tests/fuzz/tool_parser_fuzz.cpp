// The tool-call parsers (DeepSeek-V3, DeepSeek-V3.1, Llama 3 JSON) on generated text. Input: one byte
// choosing the parser ('0', '1', '2': byte % 3), one byte choosing how the text is cut into streamed
// pieces, then the text. Checks what tool_parser.h promises: the whole text and the streamed pieces give
// the same message, events are well formed (no empty content, call indices 0, 1, ... with the id and name
// on a call's first delta), and every call's arguments are one JSON object.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/tool_parser.h"

namespace {

using aerie::server::ParsedMessage;
using aerie::server::ToolEvent;

constexpr uint64_t kSeed = 7;

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "tool parser: %s\n", what);
  std::abort();
}

void check_events(const std::vector<ToolEvent>& events) {
  int n_calls = 0;
  for (const ToolEvent& event : events) {
    if (event.is_content()) {
      if (event.content.empty()) fail("an empty content event");
      continue;
    }
    if (event.tool_index == n_calls) {
      if (event.id.size() != 29 || event.name.empty()) fail("a call's first event lacks its id or name");
      ++n_calls;
    } else if (event.tool_index > n_calls || !event.id.empty() || !event.name.empty()) {
      fail("call indices out of order, or an id or name after a call's first event");
    }
  }
}

// Pieces of 1 to 16 bytes, their lengths from a small generator seeded by `cut`.
std::vector<ToolEvent> parse_streamed(aerie::server::ToolParserKind kind, std::string_view text, uint8_t cut) {
  auto parser = aerie::server::make_tool_parser(kind, kSeed);
  std::vector<ToolEvent> events;
  uint32_t state = 0x9e3779b9u ^ cut;
  for (size_t at = 0; at < text.size();) {
    state = state * 1664525u + 1013904223u;
    const size_t n = std::min<size_t>(text.size() - at, 1 + (state >> 28));
    parser->push(text.substr(at, n), events);
    at += n;
  }
  parser->finish(events);
  return events;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return -1;
  const auto kind = static_cast<aerie::server::ToolParserKind>(data[0] % 3);
  const std::string_view text(reinterpret_cast<const char*>(data + 2), size - 2);
  const ParsedMessage whole = aerie::server::make_tool_parser(kind, kSeed)->parse(text);
  const std::vector<ToolEvent> events = parse_streamed(kind, text, data[1]);
  check_events(events);
  if (aerie::server::collect_events(events) != whole) fail("streamed and whole parses differ");
  for (const aerie::server::ToolCall& call : whole.tool_calls) {
    if (!nlohmann::ordered_json::parse(call.arguments, nullptr, false).is_object()) {
      fail("a call's arguments are not a JSON object");
    }
  }
  return whole.tool_calls.empty() ? -1 : 0;
}
