// Builds a JsonGrammar: nodes are added (possibly referring to nodes not filled in yet, for recursion),
// then finish() checks and completes it:
//   1. anyOf chains that read no input (A = anyOf[B], B = anyOf[A]; e.g. {"$ref": "#"}) are refused;
//   2. nodes that cannot produce any finite value are found (fixed point) and pruned where optional —
//      anyOf alternatives, optional properties, array items (the array then stays empty) — so the
//      matcher never admits a prefix it cannot complete; a root that cannot produce a value is an error;
//   3. each listed object gets, per position, the literal trie of the keys that may come next (or, with
//      dependencies or member counts, one trie of all its keys and its JsonObjectRules);
//   4. each anyOf gets its first-byte dispatch table.
// Nodes and table entries are counted against SchemaLimits as they are made: beyond one, aerie::Error.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/limits.h"
#include "grammar/json_grammar.h"

namespace aerie {

// Whether some string matches kString node n's pattern within its length bounds (true without a
// pattern; see json_grammar.h on lengths).
bool string_pattern_satisfiable(const JsonGrammar& g, const JsonNode& n);

class JsonGrammarBuilder {
 public:
  explicit JsonGrammarBuilder(const SchemaLimits& limits = {});

  // Every add_* writes into node `into` when given (a node reserved earlier, which others may already
  // refer to), else appends a new node; it returns the node's id.
  uint32_t add_node(const JsonNode& node, std::string path, uint32_t into = kJsonNoNode);
  JsonNode& node(uint32_t id) { return grammar_->nodes[id]; }
  const JsonGrammar& grammar() const { return *grammar_; }

  // Typed helpers. Every alternative/property list is stored contiguously when set.
  uint32_t add_anyof(const std::vector<uint32_t>& alternatives, std::string path, uint32_t into = kJsonNoNode);
  void set_alternatives(uint32_t anyof, const std::vector<uint32_t>& alternatives);
  uint32_t add_string(uint32_t min_length, uint32_t max_length, std::string path, uint32_t into = kJsonNoNode);
  // Gives string node `string_node` the automaton `pattern` (regex.h), already stored by add_pattern.
  void set_pattern(uint32_t string_node, uint32_t pattern) { node(string_node).pattern = pattern; }
  // Stores an automaton for strings (at most kJsonMaxPatternStates states; its table counts against
  // max_table_entries) and returns its index in JsonGrammar::patterns.
  uint32_t add_pattern(RegexDfa pattern, const std::string& path);
  uint32_t add_number(bool integer, std::string path, uint32_t into = kJsonNoNode);
  // `tuple`: the nodes of the first items (prefixItems); `items` follows them.
  uint32_t add_array(uint32_t items, uint32_t min_items, uint32_t max_items, std::string path,
                     uint32_t into = kJsonNoNode, const std::vector<uint32_t>& tuple = {});
  uint32_t add_listed_object(std::vector<JsonProperty> properties, std::string path, uint32_t into = kJsonNoNode);
  uint32_t add_map_object(uint32_t values, std::string path, uint32_t into = kJsonNoNode);
  // A literal node over the given serialisations (an empty list admits nothing).
  uint32_t add_literal(const std::vector<std::string>& literals, std::string path, uint32_t into = kJsonNoNode);
  // `values`: the trie value of each literal (default 0); equal values are one choice for uniqueItems.
  void set_literals(uint32_t literal_node, const std::vector<std::string>& literals,
                    const std::vector<int32_t>& values = {});

  // Shared nodes: any JSON value, any object, any string.
  uint32_t any_value();
  uint32_t any_object();
  uint32_t any_string();

  // Steps 1-4 above; throws aerie::Error for a cycle that reads no input or an unsatisfiable root.
  // `whitespace`: the layout the matcher admits (json_grammar.h).
  std::shared_ptr<const JsonGrammar> finish(uint32_t root, JsonWhitespace whitespace = JsonWhitespace::kCompact);
  // Step 1 alone (the schema compiler runs it before it evaluates enum values against the graph).
  void check_anyof_cycles() const;

 private:
  uint32_t add_trie(std::vector<std::pair<std::string, int32_t>> entries);
  // Counts `n` more table entries (or steps of work building them) against max_table_entries.
  void charge_table(size_t n);
  std::vector<uint8_t> find_productive() const;
  void prune(const std::vector<uint8_t>& productive);
  void build_key_tries();
  bool needs_rules(const JsonNode& object) const;
  void build_object_rules(uint32_t object);
  void build_dispatch();

  SchemaLimits limits_;
  size_t table_entries_ = 0;
  std::shared_ptr<JsonGrammar> grammar_;
  uint32_t any_value_ = kJsonNoNode;
  uint32_t any_object_ = kJsonNoNode;
  uint32_t any_string_ = kJsonNoNode;
};

}  // namespace aerie
