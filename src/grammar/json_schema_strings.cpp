#include "grammar/json_schema_strings.h"

#include <algorithm>

#include "core/error.h"
#include "grammar/json_formats.h"

namespace aerie {

using Json = nlohmann::ordered_json;

uint32_t SchemaPatterns::pattern_index(const std::string& text, const std::string& keyword, const std::string& path) {
  const std::string key = "p:" + text;
  if (const auto it = cache_.find(key); it != cache_.end()) return it->second;
  RegexDfa dfa;
  RegexLimits limits;
  AERIE_CHECK(work_left_ > 0, "json schema: \"", keyword, "\" at ", path,
              ": the schema's patterns together pass their compile budget");
  limits.max_subset_work = std::min(limits.max_subset_work, work_left_);
  try {
    dfa = compile_regex(text, RegexMode::kSearch, limits);
  } catch (const Error& e) {
    throw Error(str_cat("json schema: \"", keyword, "\" at ", path, ": ", e.what()));
  }
  work_left_ -= std::min(work_left_, dfa.compile_work());
  const uint32_t index = builder_.add_pattern(std::move(dfa), path);
  cache_.emplace(key, index);
  return index;
}

uint32_t SchemaPatterns::format_index(const std::string& name, const std::string& path) {
  const std::string key = "f:" + name;
  if (const auto it = cache_.find(key); it != cache_.end()) return it->second;
  const uint32_t index = builder_.add_pattern(*json_format(name).automaton, path);
  cache_.emplace(key, index);
  return index;
}

void SchemaPatterns::apply(uint32_t id, const std::string& path, const Json& schema) {
  std::string pattern, format;
  if (schema.contains("pattern")) {
    AERIE_CHECK(schema["pattern"].is_string(), "json schema: \"pattern\" at ", path, " must be a string");
    pattern = schema["pattern"].get<std::string>();
  }
  JsonFormat known;
  if (schema.contains("format")) {
    AERIE_CHECK(schema["format"].is_string(), "json schema: \"format\" at ", path, " must be a string");
    format = schema["format"].get<std::string>();
    known = json_format(format);  // unknown: an annotation, ignored
  }
  const bool has_pattern = schema.contains("pattern");
  if (!has_pattern && known.automaton == nullptr) return;
  uint32_t index;
  if (has_pattern && known.automaton != nullptr) {
    const std::string key = "pf:" + format + '\0' + pattern;
    if (const auto it = cache_.find(key); it != cache_.end()) {
      index = it->second;
    } else {
      const RegexDfa& alone = builder_.grammar().patterns[pattern_index(pattern, "pattern", path)];
      RegexDfa both;
      try {
        both = intersect_regex(alone, *known.automaton);
      } catch (const Error& e) {
        throw Error(str_cat("json schema: \"pattern\" with \"format\": \"", format, "\" at ", path, ": ", e.what()));
      }
      index = builder_.add_pattern(std::move(both), path);
      cache_.emplace(key, index);
    }
  } else {
    index = has_pattern ? pattern_index(pattern, "pattern", path) : format_index(format, path);
  }
  builder_.set_pattern(id, index);
  JsonNode& n = builder_.node(id);
  n.max = std::min(n.max, known.max_length);
}

PatternProperties SchemaPatterns::pattern_properties(const std::string& path, const Json& schema) {
  PatternProperties out;
  if (!schema.contains("patternProperties")) return out;
  const Json& p = schema["patternProperties"];
  AERIE_CHECK(p.is_object(), "json schema: \"patternProperties\" at ", path, " must be an object");
  for (const auto& [pattern, subschema] : p.items()) {
    PatternProperties::Entry e;
    e.pattern = pattern;
    e.automaton = pattern_index(pattern, "patternProperties", path);
    e.any_value = subschema == true || subschema == Json::object();
    out.entries.push_back(std::move(e));
  }
  return out;
}

uint32_t SchemaPatterns::map_key_node(const PatternProperties& patterns, const std::string& path) {
  if (patterns.entries.empty()) return kJsonNoNode;
  AERIE_CHECK(patterns.entries.size() == 1, "json schema: unsupported keyword \"patternProperties\" at ", path,
              " with more than one pattern and no \"properties\" (a key may match several)");
  const uint32_t key = builder_.add_string(0, 0xffffffffu, path + " (pattern keys)");
  builder_.set_pattern(key, patterns.entries[0].automaton);
  if (!string_pattern_satisfiable(builder_.grammar(), builder_.grammar().nodes[key])) return kJsonNoNode;
  return key;
}

void SchemaPatterns::refuse_overlap(const PatternProperties& patterns, const std::string& name,
                                    const std::string& path) const {
  for (const PatternProperties::Entry& e : patterns.entries)
    AERIE_CHECK(e.any_value || !builder_.grammar().patterns[e.automaton].matches(name), "json schema: property \"",
                name, "\" at ", path, " also matches \"patternProperties\" /", e.pattern,
                "/: a property under both is not supported");
}

const PatternProperties::Entry* SchemaPatterns::matching(const PatternProperties& patterns, const std::string& name,
                                                         const std::string& path) const {
  const PatternProperties::Entry* found = nullptr;
  for (const PatternProperties::Entry& e : patterns.entries) {
    if (!builder_.grammar().patterns[e.automaton].matches(name)) continue;
    AERIE_CHECK(found == nullptr, "json schema: required property \"", name, "\" at ", path,
                " matches more than one pattern of \"patternProperties\" (not supported)");
    found = &e;
  }
  return found;
}

}  // namespace aerie
