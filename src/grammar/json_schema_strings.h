// The schema compiler's string patterns (json_schema.cpp): `pattern` and `format` on string schemas, and
// `patternProperties`, as automata (regex.h) attached to kString nodes (json_grammar.h).
//
// - pattern: ECMAScript, unanchored as JSON Schema defines it (RegexMode::kSearch).
// - format: the formats of json_formats.h; an unknown format is an annotation and ignored. With a pattern
//   as well, the string must match both (the automata's product). A format's length cap lowers maxLength.
// - patternProperties, in the forms the grammar can hold: an object without properties and required names
//   whose keys all match one pattern (a map: keys are strings with that pattern, values its schema); beside
//   properties, listed properties are emitted as usual (no pattern-only keys), each refused if its name
//   matches a pattern whose schema is not `true`/{} (both schemas would apply); a required name outside
//   properties that matches one pattern takes that pattern's schema. Several patterns on a map, or a
//   required name matching several, are refused by name.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "grammar/json_grammar_builder.h"
#include "grammar/regex.h"

namespace aerie {

struct PatternProperties {
  struct Entry {
    std::string pattern;
    uint32_t automaton = 0;  // index in JsonGrammar::patterns
    bool any_value = false;  // its schema is true or {}
  };
  std::vector<Entry> entries;
};

class SchemaPatterns {
 public:
  explicit SchemaPatterns(JsonGrammarBuilder& builder) : builder_(builder) {}

  // Attaches the schema's pattern and/or known format to string node `id`. Throws aerie::Error naming the
  // keyword and the path.
  void apply(uint32_t id, const std::string& path, const nlohmann::ordered_json& schema);
  // The schema's patternProperties (empty when absent), each pattern compiled.
  PatternProperties pattern_properties(const std::string& path, const nlohmann::ordered_json& schema);
  // The key node of a map whose keys match the one pattern; kJsonNoNode when there are no patterns or no
  // string matches it. More than one pattern is refused.
  uint32_t map_key_node(const PatternProperties& patterns, const std::string& path);
  // Refuses a listed property whose name matches a pattern with a schema of its own.
  void refuse_overlap(const PatternProperties& patterns, const std::string& name, const std::string& path) const;
  // The one pattern `name` matches, nullptr for none; several are refused.
  const PatternProperties::Entry* matching(const PatternProperties& patterns, const std::string& name,
                                           const std::string& path) const;

 private:
  // The automaton's index in JsonGrammar::patterns, compiled once per (kind, text).
  uint32_t pattern_index(const std::string& text, const std::string& keyword, const std::string& path);
  uint32_t format_index(const std::string& name, const std::string& path);

  JsonGrammarBuilder& builder_;
  std::map<std::string, uint32_t> cache_;  // "p:" + pattern, "f:" + format, "pf:" + both
  // Subset-construction work left for this schema's patterns together (RegexLimits::max_subset_work each):
  // a schema of many costly patterns is refused within about a second.
  size_t work_left_ = size_t{1} << 24;
};

}  // namespace aerie
