// A JSON grammar (what json_schema.h compiles a schema into) and its byte-level matcher, a pushdown
// automaton that reads the output one byte at a time and refuses the first byte that cannot lead to a
// complete document.
//
// The grammar is a graph of value nodes: literals (enum/const values, true/false/null: a byte trie of
// their serialisations), strings, numbers, objects, arrays and anyOf. Objects are either "listed" (keys
// from a fixed list, in that order; optional ones may be skipped, required ones must appear) or "maps"
// (any string key, every value of one node). Recursion (through $ref) is a cycle in the graph; the
// matcher's stack bounds how deep it is followed. Beyond that, all in O(1) state per frame (JsonFrame's
// `extra`, 64 bits): listed objects of at most 64 properties may carry rules (dependencies between
// properties, minProperties/maxProperties) checked against the mask of properties written so far, and
// only keys after which the object can still be completed are admitted; maps count their members; arrays
// may start with a tuple of per-position item nodes (prefixItems) and may hold distinct values of an enum
// of at most 64 values (uniqueItems, a mask of used values); integers may have to be a multiple of a
// 32-bit number (the remainder of the digits so far). Nothing is allocated per byte, and a prefix is
// admitted only when some completion of it is.
//
// Output form the matcher admits (documented choices, all of them valid JSON):
// - JSON text exactly per RFC 8259: numbers -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?, strings with
//   the escapes \" \\ \/ \b \f \n \r \t \uXXXX, well-formed UTF-8 (no overlongs, no surrogates, nothing
//   above U+10FFFF) and no raw control characters. A \u escape of a surrogate must be a high one followed
//   at once by a low one (lone surrogates are refused: they cannot become UTF-8).
// - Whitespace per the grammar's JsonWhitespace mode. kCompact (the default): none at all, so the document
//   is its compact serialisation, as json.dumps(v, separators=(",", ":")) writes it (and as OpenAI's
//   structured outputs look); every layout byte would be a token the model pays for and a sampling choice
//   that carries no information. kAny: space, tab, LF, CR where RFC 8259 allows them inside the document,
//   at most kJsonMaxWhitespace bytes in a row (enough for a newline and indentation a few levels deep), so
//   a model cannot spin on whitespace. In both modes none before the top-level value (the output starts
//   with it) nor after it (a finished document ends at its last byte: only an end-of-sequence token may
//   follow). Whitespace inside strings is string content, not layout: both modes admit it.
// - A string with a pattern (regex.h) admits exactly the strings whose decoded text (escapes such as \n,
//   \" or \u00e9 read as the code point they stand for) the automaton accepts, refused at the first byte
//   (or escape digit) after which no accepted text can follow; with minLength/maxLength as well, a prefix
//   is admitted when some completion's length (the automaton's fewest and most characters to an accepting
//   state) fits: exact unless the accepted lengths from that state have gaps that straddle the bounds.
// - At most kJsonMaxDepth frames on a parse stack (one per open object/array/string, plus one), i.e. about
//   60 levels of nesting; deeper openings are refused.
// - anyOf alternatives that share a prefix are followed in parallel (one stack each) until the bytes tell
//   them apart; a byte that would need more than kJsonMaxParses parallel stacks is refused.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/regex.h"

namespace aerie {

inline constexpr int kJsonMaxWhitespace = 16;
inline constexpr int kJsonMaxDepth = 64;
inline constexpr int kJsonMaxParses = 1024;
inline constexpr uint32_t kJsonNoNode = 0xffffffffu;
// A string's pattern state lives in a 16-bit frame field (JsonFrame::pattern_state).
inline constexpr uint32_t kJsonMaxPatternStates = 0xffff;
// Numeric bounds are integers of magnitude below this (larger ones are refused by the schema compiler);
// +-kJsonUnbounded means no bound.
inline constexpr int64_t kJsonUnbounded = int64_t(1) << 61;

// Layout whitespace between the document's tokens (see above): none, or RFC 8259's, bounded per gap.
enum class JsonWhitespace : uint8_t { kCompact, kAny };

enum class JsonNodeKind : uint8_t { kLiteral, kString, kNumber, kObject, kArray, kAnyOf };

struct JsonNode {
  JsonNodeKind kind = JsonNodeKind::kAnyOf;
  bool integer = false;  // kNumber: no fraction or exponent
  // kNumber bounds: lo <= value <= hi (< or > when exclusive), integers. A bounded number is written
  // without an exponent, so the matcher can check each digit against the bounds.
  bool bounded = false;
  bool lo_exclusive = false;
  bool hi_exclusive = false;
  int64_t lo = -kJsonUnbounded;
  int64_t hi = kJsonUnbounded;
  bool map = false;      // kObject: any string key (key node `key`), every value `child`
  // kArray: items are distinct values of the literal node `child` (uniqueItems; at most 64 values).
  bool unique = false;
  // kNumber: the value is an integer multiple of this (0: no multipleOf). Only on integer nodes.
  uint32_t multiple_of = 0;
  uint32_t min = 0;            // kString: code points; kArray: items; kObject: members (minProperties)
  uint32_t max = 0xffffffffu;  // kString: code points; kArray: items; kObject: members (maxProperties)
  // kArray: items after the tuple; kObject map: values; kLiteral: root trie state; kObject listed: the
  // index of its JsonObjectRules, or kJsonNoNode when it has none.
  uint32_t child = kJsonNoNode;
  uint32_t key = kJsonNoNode;   // kObject map: the string node keys follow
  // kString: the automaton (JsonGrammar::patterns) the decoded string must match, or kJsonNoNode.
  uint32_t pattern = kJsonNoNode;
  // kObject listed: properties[first, first + count) in output order, key_nodes[keys, keys + count + 1)
  // (one per position: the literal node of the keys that may come next, kJsonNoNode at the end), and the
  // index of the last required property plus one (the object may close at a position >= it).
  // kAnyOf: alternatives[first, first + count); dispatch[keys, keys + 257) once built (see below).
  // kArray: tuple_items[first, first + count), the nodes of the first `count` items (prefixItems).
  uint32_t first = 0;
  uint32_t count = 0;
  uint32_t keys = 0;
  uint32_t close_from = 0;
};

struct JsonProperty {
  std::string name;     // as the schema spells it (the key literal is its JSON serialisation)
  uint32_t value = kJsonNoNode;
  bool required = false;
  // Names of properties of the same object that must be present when this one is (dependentRequired,
  // dependencies); the builder turns them into JsonObjectRules.
  std::vector<std::string> dependencies;
};

// A listed object (at most 64 properties, by position) whose members are constrained beyond "required
// ones appear": dependencies and member counts. Its key trie holds every key; which keys may come next is
// decided from the frame's mask of the properties written so far (json_grammar.cpp, allowed_keys).
struct JsonObjectRules {
  uint64_t required = 0;
  uint64_t never = 0;         // properties that cannot be written (a dependency was pruned)
  uint32_t dependencies = 0;  // dependency_masks[dependencies + i]: what property i needs, transitively
};

// A state of a literal trie: `value` >= 0 when a literal ends here (for keys: the property index within
// the object; for enums: the index of the value), edges[first_edge, first_edge + n_edges) sorted by byte.
// `below`: bit min(v, 63) for every value v that ends here or further on, so that a frame that forbids
// some values (JsonFrame::extra) refuses the first byte that can only lead to them.
struct JsonLiteralState {
  uint64_t below = 0;
  int32_t value = -1;
  uint32_t first_edge = 0;
  uint32_t n_edges = 0;
};
struct JsonLiteralEdge {
  uint8_t byte = 0;
  uint32_t target = 0;
};

struct JsonGrammar {
  std::vector<JsonNode> nodes;
  uint32_t root = kJsonNoNode;
  JsonWhitespace whitespace = JsonWhitespace::kCompact;
  std::vector<JsonProperty> properties;
  std::vector<uint32_t> key_nodes;
  std::vector<JsonLiteralState> literal_states;
  std::vector<JsonLiteralEdge> literal_edges;
  std::vector<uint32_t> alternatives;
  std::vector<uint32_t> tuple_items;
  std::vector<JsonObjectRules> object_rules;
  std::vector<uint64_t> dependency_masks;
  // Per anyOf node, 257 offsets into dispatch_nodes: the concrete (non-anyOf) alternatives, anyOf nesting
  // flattened, whose value may start with byte b are dispatch_nodes[offsets[b], offsets[b + 1]).
  std::vector<uint32_t> dispatch_offsets;
  std::vector<uint32_t> dispatch_nodes;
  std::vector<std::string> paths;  // per node: the schema path it came from, for messages
  // Automata of strings with a pattern or format (regex.h), their states at most kJsonMaxPatternStates.
  std::vector<RegexDfa> patterns;

  // Follows the literal edge for `byte` from `state`; kJsonNoNode when there is none.
  uint32_t literal_step(uint32_t state, uint8_t byte) const;
};

// Whether some number satisfies a kNumber node's bounds (and integer-ness).
bool json_number_satisfiable(const JsonNode& number);
// Whether a listed object with rules can be written at all (from its opening brace).
bool json_object_completable(const JsonGrammar& grammar, const JsonNode& object);

// One level of a parse stack. `node` is a grammar node, or kJsonNoNode for the bottom (document) frame
// whose `value` is then the root node. `value`: literal trie state | string code points | array items |
// map members (those three counted only when the node has length bounds or a tuple, else 0) |
// object position (the index of the next property that may come) | for a bounded number: sign, whether
// the fraction has a non-zero digit, and the integer part's magnitude — all kind-specific. A string with
// a pattern keeps its automaton state in pattern_state and, inside a \u escape, the escape's digits so far
// and a high surrogate's bits in value's upper half (json_grammar.cpp, step_pattern).
// `extra`, also kind-specific: a listed object with rules: the mask of properties written; a unique array:
// the mask of values used; a literal: the mask of values it must not end in (keys the object does not
// allow next, items already used); a number with multipleOf: the integer part's remainder.
struct JsonFrame {
  uint32_t node = kJsonNoNode;
  uint8_t phase = 0;
  uint8_t whitespace = 0;  // whitespace bytes in the current gap
  uint16_t pattern_state = 0;
  uint64_t value = 0;
  uint64_t extra = 0;
  bool operator==(const JsonFrame&) const = default;
};

// A single parse stack as the mask walk carries it below its root state (json_constraint.cpp): the bottom
// `kept` frames of the root's stack under frames of its own. A token changes a few frames at the top of
// the stack (closes a string, opens the next key), so this is what is copied per trie node, not the stack.
inline constexpr uint32_t kJsonLightFrames = 6;
struct JsonLightStack {
  uint32_t kept = 0;
  uint32_t n_own = 0;
  JsonFrame own[kJsonLightFrames];
};

// The matcher state: one or more parse stacks (bottom first, concatenated). Copying it copies two small
// vectors; copy-assigning into a matcher that already has the capacity does not allocate. The grammar must
// outlive the matcher.
class JsonMatcher {
 public:
  JsonMatcher() = default;
  explicit JsonMatcher(const JsonGrammar& grammar);

  // Moves past one byte; returns false and leaves the state as it was when the byte is refused.
  bool feed(uint8_t byte);
  // All bytes or none: returns false (state unchanged) when any byte is refused.
  bool feed(std::string_view bytes);
  // next = this state moved past `byte` (next's previous content is overwritten; it must not be *this).
  // Returns false when the byte is refused (next is then unspecified).
  bool advance(uint8_t byte, JsonMatcher& next) const;

  // The bytes so far form a complete document.
  bool accepting() const;
  // Complete, and no further byte is allowed (e.g. after the closing brace of the top-level object; a
  // top-level number is accepting but not finished).
  bool finished() const;
  int n_stacks() const { return int(ends_.size()); }
  const JsonGrammar* grammar() const { return grammar_; }

  // The mask walk's fast path (json_constraint.cpp): most bytes (string characters, digits, whitespace)
  // change only the top frame of a single stack, so the walk carries that frame alone.
  enum class TopStep { kTopOnly, kRefused, kOther };
  // What `byte` does to a top frame: kTopOnly (top is updated; nothing is pushed or popped), kRefused (the
  // stack refuses it), or kOther (a push or pop: take the general path; top is unchanged).
  static TopStep step_top(const JsonGrammar& grammar, JsonFrame& top, uint8_t byte);
  const JsonFrame* single_top() const { return ends_.size() == 1 ? &frames_.back() : nullptr; }
  // Every stack's frames, bottom first, one stack after another (a single stack: the whole vector).
  const std::vector<JsonFrame>& frames() const { return frames_; }
  // When every stack is inside a string at a character boundary, any plain text (token_trie.h) of up to
  // this many characters may follow (the smallest room left under maxLength); else 0.
  size_t plain_text_budget() const;
  // The light stack of this single-stack state itself: all its frames kept, none of its own.
  JsonLightStack light_root() const { return {uint32_t(frames_.size()), 0, {}}; }
  // What advance() does to a single stack, on a light stack over this state's frames: kTopOnly (moved),
  // kRefused, or kOther when the byte forks the stack (an anyOf whose alternatives share the byte) or needs
  // more than kJsonLightFrames frames of its own: take the general path (`stack` is then unspecified).
  // With a `floor`, also kOther when the byte would reach a root frame below that index (json_mask_cache.h:
  // what a mask may depend on).
  TopStep step_light(JsonLightStack& stack, uint8_t byte, uint32_t floor = 0) const;
  // The top frame of a light stack over this state.
  const JsonFrame& light_top(const JsonLightStack& stack) const {
    return stack.n_own > 0 ? stack.own[stack.n_own - 1] : frames_[stack.kept - 1];
  }
  // out = the state a light stack over this state stands for.
  void from_light(const JsonLightStack& stack, JsonMatcher& out) const;

 private:
  bool feed_stack(size_t base, uint8_t byte);
  bool push_value(size_t base, uint32_t node, uint64_t extra, uint8_t byte);
  void close_top(size_t base);
  void remove_duplicate_stacks();

  const JsonGrammar* grammar_ = nullptr;
  std::vector<JsonFrame> frames_;  // every stack, bottom first, one after another
  std::vector<uint32_t> ends_;     // end offset of each stack in frames_
};

}  // namespace aerie
