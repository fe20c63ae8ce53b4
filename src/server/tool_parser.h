// Tool-call parsers: generated text -> assistant content plus OpenAI tool_calls, streamed or whole.
//
// One parser per model family, fed the detokenized text as it is generated (push), then finish() once the
// generation ends. Events are what one OpenAI chat.completion.chunk delta carries: a content fragment, or a
// tool-call delta (index; id, type and name on the call's first delta; argument fragments after). The
// non-streaming parse() is push(whole text) + finish() folded with collect_events(), so the streamed and
// whole results agree by construction, and splitting the text at any byte boundary gives the same result.
//
// A call's arguments are released when the call closes (its end marker or the end of its JSON object),
// never before: a call whose JSON turns out malformed or truncated becomes content, and a streamed delta
// cannot be taken back. Text before the calls (and any text after them) stays content.
//
// The text must be detokenized with special tokens kept (Llama's <|python_tag|> is a special token;
// DeepSeek's tool markers are added tokens that are not special).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace aerie::server {

// One streamed piece. tool_index < 0: a content fragment in `content` (a reasoning fragment when
// `reasoning`: server/reasoning.h). Otherwise a delta of the call `tool_index`: its first delta carries `id`
// and `name` (and arguments ""), later ones argument fragments.
struct ToolEvent {
  int tool_index = -1;
  bool reasoning = false;
  std::string content;
  std::string id;
  std::string name;
  std::string arguments;

  bool is_content() const { return tool_index < 0 && !reasoning; }
  bool is_reasoning() const { return tool_index < 0 && reasoning; }
  static ToolEvent text(std::string content);
  static ToolEvent thought(std::string reasoning);
  static ToolEvent call_begin(int index, std::string id, std::string name);
  static ToolEvent call_arguments(int index, std::string fragment);
  bool operator==(const ToolEvent&) const = default;
};

struct ToolCall {
  std::string id;         // "call_" + 24 alphanumerics, as OpenAI's
  std::string name;
  std::string arguments;  // a JSON object, serialized
  bool operator==(const ToolCall&) const = default;
};

struct ParsedMessage {
  std::string reasoning_content;
  std::string content;
  std::vector<ToolCall> tool_calls;
  bool operator==(const ParsedMessage&) const = default;
};

// Folds events into the message a client accumulates from them (content concatenated, calls by index).
ParsedMessage collect_events(const std::vector<ToolEvent>& events);

// OpenAI-style call ids from a seeded generator, so tests (and seeded requests) are reproducible.
class CallIdGenerator {
 public:
  explicit CallIdGenerator(uint64_t seed) : rng_(seed) {}
  std::string next();  // "call_" + 24 characters of [A-Za-z0-9]

 private:
  std::mt19937_64 rng_;
};

class ToolCallParser {
 public:
  explicit ToolCallParser(uint64_t seed) : ids_(seed) {}
  virtual ~ToolCallParser() = default;
  ToolCallParser(const ToolCallParser&) = delete;
  ToolCallParser& operator=(const ToolCallParser&) = delete;

  // Consumes the next piece of generated text; appends the events it completes to `out`.
  virtual void push(std::string_view text_delta, std::vector<ToolEvent>& out) = 0;
  // The generation ended: releases what was held back (a partial marker, an unterminated call as content).
  virtual void finish(std::vector<ToolEvent>& out) = 0;

  // The whole text at once (a fresh parser per message: parse() uses this one's state).
  ParsedMessage parse(std::string_view full_text);

 protected:
  // Emits a complete call: the begin delta (id, name) then its arguments.
  void emit_call(std::string name, std::string arguments, std::vector<ToolEvent>& out);
  // Emits only the begin delta of a new call (its arguments follow as call_arguments events); returns its
  // index.
  int begin_call(std::string name, std::vector<ToolEvent>& out);
  static void emit_text(std::string_view text, std::vector<ToolEvent>& out);

 private:
  CallIdGenerator ids_;
  int n_calls_ = 0;
};

enum class ToolParserKind { kDeepSeekV3, kDeepSeekV31, kLlama3Json };

// "deepseek_v3" | "deepseek_v31" | "llama3_json" (the --tool-parser names, as vLLM's); throws aerie::Error
// listing the names otherwise.
ToolParserKind tool_parser_kind_from_name(std::string_view name);
std::string_view tool_parser_name(ToolParserKind kind);

// The parser a checkpoint needs, from its tokenizer_config.json chat_template (how the template writes an
// assistant's tool calls back), else config.json's model_type; nullopt when neither says. Either may be
// null. DeepSeek-V3 and V3.1 share model_type "deepseek_v3", so the template decides between them.
std::optional<ToolParserKind> detect_tool_parser(const nlohmann::json& tokenizer_config,
                                                 const nlohmann::json& model_config);

std::unique_ptr<ToolCallParser> make_tool_parser(ToolParserKind kind, uint64_t seed);

// Helpers shared by the parsers.

// Generated text a parser holds, released from the front. Releasing moves an offset and the released
// bytes are dropped when more text arrives, so one push that completes many calls (a whole message given
// to parse()) costs time linear in its length instead of a copy of the rest per call.
class HeldText {
 public:
  std::string_view view() const { return std::string_view(text_).substr(start_); }
  void append(std::string_view more) {
    text_.erase(0, start_);
    start_ = 0;
    text_ += more;
  }
  void release(size_t n) { start_ += n; }  // n <= view().size()
  void clear() {
    text_.clear();
    start_ = 0;
  }

 private:
  std::string text_;
  size_t start_ = 0;
};

std::string_view trim_json_space(std::string_view text);
// A call's arguments from generated text: the trimmed text itself when it is one JSON object; the decoded
// string when it is a JSON string holding an object (arguments encoded twice); nullopt otherwise.
std::optional<std::string> arguments_from_text(std::string_view text);
// The same from a parsed value: an object serialized (keys in generated order), or a string holding one.
std::optional<std::string> arguments_from_value(const nlohmann::ordered_json& value);

}  // namespace aerie::server
