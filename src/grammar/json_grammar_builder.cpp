#include "grammar/json_grammar_builder.h"

#include <algorithm>
#include <cstdio>
#include <string_view>
#include <unordered_map>

#include "core/error.h"

namespace aerie {
namespace {

// The JSON serialisation of a key: quotes, \" \\ and control characters escaped, everything else as is.
std::string json_quote(const std::string& text) {
  std::string out = "\"";
  for (const char c : text) {
    const auto b = uint8_t(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n' || c == '\r' || c == '\t' || c == '\b' || c == '\f') {
      // The short escapes, as json.dumps and enum literals (nlohmann's dump) spell them.
      out += '\\';
      out += c == '\n' ? 'n' : c == '\r' ? 'r' : c == '\t' ? 't' : c == '\b' ? 'b' : 'f';
    } else if (b < 0x20) {
      char buffer[8];
      std::snprintf(buffer, sizeof buffer, "\\u%04x", unsigned(b));
      out += buffer;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

// The bytes a value of concrete node `n` may start with, appended to `out`.
void append_start_bytes(const JsonGrammar& g, const JsonNode& n, std::vector<uint8_t>& out) {
  switch (n.kind) {
    case JsonNodeKind::kObject: out.push_back('{'); break;
    case JsonNodeKind::kArray: out.push_back('['); break;
    case JsonNodeKind::kString: out.push_back('"'); break;
    case JsonNodeKind::kNumber:
      out.push_back('-');
      for (uint8_t d = '0'; d <= '9'; ++d) out.push_back(d);
      break;
    case JsonNodeKind::kLiteral:
      if (n.child == kJsonNoNode) break;
      for (uint32_t e = 0; e < g.literal_states[n.child].n_edges; ++e)
        out.push_back(g.literal_edges[g.literal_states[n.child].first_edge + e].byte);
      break;
    case JsonNodeKind::kAnyOf: break;
  }
}

}  // namespace

bool string_pattern_satisfiable(const JsonGrammar& g, const JsonNode& n) {
  if (n.pattern == kJsonNoNode) return true;
  const RegexDfa& dfa = g.patterns[n.pattern];
  if (dfa.empty() || dfa.min_chars(dfa.start()) > n.max) return false;
  return dfa.max_chars(dfa.start()) == kRegexUnboundedLength || dfa.max_chars(dfa.start()) >= n.min;
}

JsonGrammarBuilder::JsonGrammarBuilder(const SchemaLimits& limits)
    : limits_(limits), grammar_(std::make_shared<JsonGrammar>()) {}

void JsonGrammarBuilder::charge_table(size_t n) {
  table_entries_ += n;
  AERIE_CHECK(table_entries_ <= limits_.max_table_entries, "json schema: too large: its grammar's tables pass ",
              limits_.max_table_entries, " entries (long anyOf or $ref chains, or objects with many optional "
              "properties)");
}

uint32_t JsonGrammarBuilder::add_node(const JsonNode& node, std::string path, uint32_t into) {
  if (into != kJsonNoNode) {
    grammar_->nodes[into] = node;
    grammar_->paths[into] = std::move(path);
    return into;
  }
  AERIE_CHECK(grammar_->nodes.size() < limits_.max_nodes, "json schema: too large: more than ", limits_.max_nodes,
              " grammar nodes (about one per subschema and per property)");
  grammar_->nodes.push_back(node);
  grammar_->paths.push_back(std::move(path));
  return uint32_t(grammar_->nodes.size() - 1);
}

uint32_t JsonGrammarBuilder::add_anyof(const std::vector<uint32_t>& alternatives, std::string path, uint32_t into) {
  const uint32_t id = add_node(JsonNode{}, std::move(path), into);
  set_alternatives(id, alternatives);
  return id;
}

void JsonGrammarBuilder::set_alternatives(uint32_t anyof, const std::vector<uint32_t>& alternatives) {
  JsonNode& n = node(anyof);
  n.kind = JsonNodeKind::kAnyOf;
  n.first = uint32_t(grammar_->alternatives.size());
  n.count = uint32_t(alternatives.size());
  grammar_->alternatives.insert(grammar_->alternatives.end(), alternatives.begin(), alternatives.end());
}

uint32_t JsonGrammarBuilder::add_string(uint32_t min_length, uint32_t max_length, std::string path, uint32_t into) {
  JsonNode n;
  n.kind = JsonNodeKind::kString;
  n.min = min_length;
  n.max = max_length;
  return add_node(n, std::move(path), into);
}

uint32_t JsonGrammarBuilder::add_pattern(RegexDfa pattern, const std::string& path) {
  AERIE_CHECK(pattern.n_states() <= kJsonMaxPatternStates, "json schema: the pattern at ", path, " needs ",
              pattern.n_states(), " automaton states (at most ", kJsonMaxPatternStates, ")");
  charge_table(pattern.table_entries());
  grammar_->patterns.push_back(std::move(pattern));
  return uint32_t(grammar_->patterns.size() - 1);
}

uint32_t JsonGrammarBuilder::add_number(bool integer, std::string path, uint32_t into) {
  JsonNode n;
  n.kind = JsonNodeKind::kNumber;
  n.integer = integer;
  return add_node(n, std::move(path), into);
}

uint32_t JsonGrammarBuilder::add_array(uint32_t items, uint32_t min_items, uint32_t max_items, std::string path,
                                       uint32_t into, const std::vector<uint32_t>& tuple) {
  JsonNode n;
  n.kind = JsonNodeKind::kArray;
  n.child = items;
  n.min = min_items;
  n.max = max_items;
  n.first = uint32_t(grammar_->tuple_items.size());
  n.count = uint32_t(tuple.size());
  grammar_->tuple_items.insert(grammar_->tuple_items.end(), tuple.begin(), tuple.end());
  return add_node(n, std::move(path), into);
}

uint32_t JsonGrammarBuilder::add_listed_object(std::vector<JsonProperty> properties, std::string path, uint32_t into) {
  JsonNode n;
  n.kind = JsonNodeKind::kObject;
  n.first = uint32_t(grammar_->properties.size());
  n.count = uint32_t(properties.size());
  for (auto& p : properties) grammar_->properties.push_back(std::move(p));
  return add_node(n, std::move(path), into);
}

uint32_t JsonGrammarBuilder::add_map_object(uint32_t values, std::string path, uint32_t into) {
  JsonNode n;
  n.kind = JsonNodeKind::kObject;
  n.map = true;
  n.key = any_string();
  n.child = values;
  return add_node(n, std::move(path), into);
}

uint32_t JsonGrammarBuilder::add_literal(const std::vector<std::string>& literals, std::string path, uint32_t into) {
  JsonNode n;
  n.kind = JsonNodeKind::kLiteral;
  const uint32_t id = add_node(n, std::move(path), into);
  set_literals(id, literals);
  return id;
}

void JsonGrammarBuilder::set_literals(uint32_t literal_node, const std::vector<std::string>& literals,
                                      const std::vector<int32_t>& values) {
  std::vector<std::pair<std::string, int32_t>> entries;
  for (size_t i = 0; i < literals.size(); ++i) entries.emplace_back(literals[i], values.empty() ? 0 : values[i]);
  node(literal_node).kind = JsonNodeKind::kLiteral;
  node(literal_node).child = entries.empty() ? kJsonNoNode : add_trie(std::move(entries));
}

uint32_t JsonGrammarBuilder::any_string() {
  if (any_string_ == kJsonNoNode) any_string_ = add_string(0, 0xffffffffu, "any string");
  return any_string_;
}

uint32_t JsonGrammarBuilder::any_value() {
  if (any_value_ != kJsonNoNode) return any_value_;
  any_value_ = add_node(JsonNode{}, "any value");  // filled in below: the containers refer to it
  const uint32_t object = any_object();
  const uint32_t array = add_array(any_value_, 0, 0xffffffffu, "any array");
  const uint32_t scalars = add_literal({"true", "false", "null"}, "true, false or null");
  set_alternatives(any_value_, {object, array, any_string(), add_number(false, "any number"), scalars});
  return any_value_;
}

uint32_t JsonGrammarBuilder::any_object() {
  if (any_object_ == kJsonNoNode) {
    const uint32_t values = any_value();
    if (any_object_ == kJsonNoNode) any_object_ = add_map_object(values, "any object");
  }
  return any_object_;
}

// A byte trie over (literal, value) entries, built breadth-first from the sorted list so that each state's
// edges are contiguous and no recursion follows a long literal.
uint32_t JsonGrammarBuilder::add_trie(std::vector<std::pair<std::string, int32_t>> entries) {
  std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  entries.erase(std::unique(entries.begin(), entries.end(),
                            [](const auto& a, const auto& b) { return a.first == b.first; }),
                entries.end());
  size_t bytes = 0;  // at most one state and one edge per byte
  for (const auto& e : entries) bytes += e.first.size() + 1;
  charge_table(bytes);
  auto& states = grammar_->literal_states;
  auto& edges = grammar_->literal_edges;
  struct Task {
    size_t lo, hi, depth;
    size_t edge;  // the edge that leads here, or SIZE_MAX for the root
  };
  std::vector<Task> tasks{{0, entries.size(), 0, SIZE_MAX}};
  const auto root = uint32_t(states.size());
  while (!tasks.empty()) {
    const Task t = tasks.back();
    tasks.pop_back();
    const auto state = uint32_t(states.size());
    states.emplace_back();
    if (t.edge != SIZE_MAX) edges[t.edge].target = state;
    size_t i = t.lo;
    if (i < t.hi && entries[i].first.size() == t.depth) states[state].value = entries[i++].second;
    states[state].first_edge = uint32_t(edges.size());
    while (i < t.hi) {
      const char byte = entries[i].first[t.depth];
      size_t j = i;
      while (j < t.hi && entries[j].first[t.depth] == byte) ++j;
      edges.push_back(JsonLiteralEdge{uint8_t(byte), 0});
      tasks.push_back(Task{i, j, t.depth + 1, edges.size() - 1});
      i = j;
    }
    states[state].n_edges = uint32_t(edges.size()) - states[state].first_edge;
  }
  // Targets were made after their states: one pass from the last state back fills `below`.
  for (size_t s = states.size(); s-- > root;) {
    JsonLiteralState& state = states[s];
    state.below = state.value >= 0 ? uint64_t(1) << std::min(state.value, 63) : 0;
    for (uint32_t e = 0; e < state.n_edges; ++e) state.below |= states[edges[state.first_edge + e].target].below;
  }
  return root;
}

void JsonGrammarBuilder::check_anyof_cycles() const {
  const JsonGrammar& g = *grammar_;
  enum : uint8_t { kWhite, kGrey, kBlack };
  std::vector<uint8_t> color(g.nodes.size(), kWhite);
  // Iterative depth-first search over anyOf -> anyOf edges; (node, next alternative index).
  std::vector<std::pair<uint32_t, uint32_t>> stack;
  for (uint32_t start = 0; start < g.nodes.size(); ++start) {
    if (color[start] != kWhite || g.nodes[start].kind != JsonNodeKind::kAnyOf) continue;
    stack.emplace_back(start, 0);
    color[start] = kGrey;
    while (!stack.empty()) {
      auto& [id, next] = stack.back();
      const JsonNode& n = g.nodes[id];
      if (next == n.count) {
        color[id] = kBlack;
        stack.pop_back();
        continue;
      }
      const uint32_t alt = g.alternatives[n.first + next++];
      if (g.nodes[alt].kind != JsonNodeKind::kAnyOf || color[alt] == kBlack) continue;
      AERIE_CHECK(color[alt] != kGrey, "json schema: ", g.paths[alt],
                  " refers to itself without reading any input ($ref/anyOf cycle)");
      color[alt] = kGrey;
      stack.emplace_back(alt, 0);
    }
  }
}

std::vector<uint8_t> JsonGrammarBuilder::find_productive() const {
  const JsonGrammar& g = *grammar_;
  std::vector<uint8_t> productive(g.nodes.size(), 0);
  for (bool changed = true; changed;) {
    changed = false;
    for (uint32_t id = 0; id < g.nodes.size(); ++id) {
      if (productive[id]) continue;
      const JsonNode& n = g.nodes[id];
      bool p = false;
      switch (n.kind) {
        case JsonNodeKind::kLiteral: p = n.child != kJsonNoNode; break;
        case JsonNodeKind::kString: p = n.min <= n.max && string_pattern_satisfiable(g, n); break;
        case JsonNodeKind::kNumber: p = json_number_satisfiable(n); break;
        case JsonNodeKind::kArray:
          p = n.min <= n.max;  // the first min items must be producible
          for (uint32_t i = 0; i < n.min && i < n.count && p; ++i) p = productive[g.tuple_items[n.first + i]];
          p = p && (n.min <= n.count || productive[n.child]);
          break;
        case JsonNodeKind::kObject: {
          // A map may stay empty (minProperties is at most 1: any key will do); a listed object needs its
          // required properties and, with rules, enough producible members (the rules' own check is exact
          // once pruned: build_object_rules).
          p = !n.map || n.min == 0 || productive[n.child];
          uint32_t n_productive = 0;
          for (uint32_t i = 0; i < n.count && !n.map; ++i) {
            const JsonProperty& prop = g.properties[n.first + i];
            if (prop.required && !productive[prop.value]) p = false;
            n_productive += productive[prop.value];
          }
          if (!n.map && n_productive < n.min) p = false;
          break;
        }
        case JsonNodeKind::kAnyOf:
          for (uint32_t i = 0; i < n.count; ++i) p = p || productive[g.alternatives[n.first + i]];
          break;
      }
      if (p) productive[id] = 1, changed = true;
    }
  }
  return productive;
}

void JsonGrammarBuilder::prune(const std::vector<uint8_t>& productive) {
  JsonGrammar& g = *grammar_;
  for (JsonNode& n : g.nodes) {
    if (n.kind == JsonNodeKind::kAnyOf) {
      auto begin = g.alternatives.begin() + n.first;
      n.count = uint32_t(std::remove_if(begin, begin + n.count, [&](uint32_t a) { return !productive[a]; }) - begin);
    } else if (n.kind == JsonNodeKind::kArray) {
      // The first item that cannot be produced caps the length (at least min: the array is productive).
      for (uint32_t i = 0; i < n.count; ++i)
        if (!productive[g.tuple_items[n.first + i]]) n.max = std::min(n.max, i);
      if (!productive[n.child]) n.max = std::min(n.max, n.count);
    } else if (n.kind == JsonNodeKind::kObject && n.map && !productive[n.child]) {
      n.map = false;  // only {} remains
      n.count = 0;
      n.child = kJsonNoNode;  // a listed object's child indexes its rules (none here), not a value node
    } else if (n.kind == JsonNodeKind::kObject && !n.map) {
      auto begin = g.properties.begin() + n.first;
      const auto end = std::remove_if(begin, begin + n.count,
                                      [&](const JsonProperty& p) { return !p.required && !productive[p.value]; });
      n.count = uint32_t(end - begin);
    }
  }
}

// For a listed object at position pos (properties before pos are done), the next key is one of
// properties[pos..r], r the first required one at or after pos (or the last).
void JsonGrammarBuilder::build_key_tries() {
  JsonGrammar& g = *grammar_;
  const size_t n_nodes = g.nodes.size();  // key nodes are added below
  for (uint32_t id = 0; id < n_nodes; ++id) {
    if (g.nodes[id].kind != JsonNodeKind::kObject || g.nodes[id].map) continue;
    const JsonNode object = g.nodes[id];
    if (needs_rules(object)) {
      build_object_rules(id);
      continue;
    }
    uint32_t close_from = 0;
    for (uint32_t i = 0; i < object.count; ++i)
      if (g.properties[object.first + i].required) close_from = i + 1;
    std::vector<uint32_t> keys;
    for (uint32_t pos = 0; pos < object.count; ++pos) {
      std::vector<std::pair<std::string, int32_t>> entries;
      for (uint32_t i = pos; i < object.count; ++i) {
        entries.emplace_back(json_quote(g.properties[object.first + i].name), int32_t(i));
        if (g.properties[object.first + i].required) break;
      }
      JsonNode key;
      key.kind = JsonNodeKind::kLiteral;
      key.child = add_trie(std::move(entries));
      keys.push_back(add_node(key, g.paths[id] + " (keys)"));
    }
    keys.push_back(kJsonNoNode);
    JsonNode& n = g.nodes[id];
    n.close_from = close_from;
    n.keys = uint32_t(g.key_nodes.size());
    g.key_nodes.insert(g.key_nodes.end(), keys.begin(), keys.end());
  }
}

bool JsonGrammarBuilder::needs_rules(const JsonNode& object) const {
  const JsonGrammar& g = *grammar_;
  if (object.min > 0 || object.max < object.count) return true;
  for (uint32_t i = 0; i < object.count; ++i)
    if (!g.properties[object.first + i].dependencies.empty()) return true;
  return false;
}

// One key trie for every position (the rules pick the keys), and the masks: required, never (a
// dependency that was pruned or is not listed) and each property's dependencies, closed transitively.
void JsonGrammarBuilder::build_object_rules(uint32_t id) {
  JsonGrammar& g = *grammar_;
  const JsonNode object = g.nodes[id];
  AERIE_CHECK(object.count <= 64, "json schema: ", g.paths[id], " has ", object.count,
              " properties with dependencies or minProperties/maxProperties (at most 64 are supported)");
  std::unordered_map<std::string_view, uint32_t> index;
  for (uint32_t i = 0; i < object.count; ++i) index.emplace(g.properties[object.first + i].name, i);
  JsonObjectRules rules;
  rules.dependencies = uint32_t(g.dependency_masks.size());
  std::vector<uint64_t> depends(object.count, 0);
  for (uint32_t i = 0; i < object.count; ++i) {
    const JsonProperty& p = g.properties[object.first + i];
    if (p.required) rules.required |= uint64_t(1) << i;
    for (const std::string& name : p.dependencies) {
      const auto it = index.find(name);
      if (it == index.end()) rules.never |= uint64_t(1) << i;
      else if (it->second != i) depends[i] |= uint64_t(1) << it->second;
    }
  }
  charge_table(size_t(object.count) * object.count);
  for (bool changed = true; changed;) {  // transitive closure: at most 64 rounds of 64 masks
    changed = false;
    for (uint32_t i = 0; i < object.count; ++i) {
      uint64_t closed = depends[i];
      for (uint64_t m = depends[i]; m != 0; m &= m - 1) closed |= depends[size_t(__builtin_ctzll(m))];
      if ((closed & rules.never) != 0) rules.never |= uint64_t(1) << i;
      if (closed != depends[i]) depends[i] = closed, changed = true;
    }
  }
  const bool counted = object.min > 0 || object.max < object.count;
  for (uint32_t i = 0; i < object.count && counted; ++i)
    AERIE_CHECK((depends[i] >> i & 1) == 0, "json schema: ", g.paths[id],
                ": minProperties/maxProperties together with cyclic dependencies (\"",
                g.properties[object.first + i].name, "\") are not supported");
  std::vector<std::pair<std::string, int32_t>> entries;
  for (uint32_t i = 0; i < object.count; ++i)
    entries.emplace_back(json_quote(g.properties[object.first + i].name), int32_t(i));
  JsonNode key;
  key.kind = JsonNodeKind::kLiteral;
  key.child = add_trie(std::move(entries));
  const uint32_t key_node = add_node(key, g.paths[id] + " (keys)");
  g.dependency_masks.insert(g.dependency_masks.end(), depends.begin(), depends.end());
  JsonNode& n = g.nodes[id];
  n.child = uint32_t(g.object_rules.size());
  g.object_rules.push_back(rules);
  n.keys = uint32_t(g.key_nodes.size());
  g.key_nodes.insert(g.key_nodes.end(), size_t(object.count) + 1, key_node);
  g.key_nodes.back() = kJsonNoNode;
  AERIE_CHECK(json_object_completable(g, n), "json schema: ", g.paths[id],
              " admits no object: its required properties, dependencies and minProperties/maxProperties contradict "
              "each other");
}

void JsonGrammarBuilder::build_dispatch() {
  JsonGrammar& g = *grammar_;
  std::vector<uint8_t> seen(g.nodes.size(), 0);
  std::vector<uint32_t> concrete, stack, visited;
  std::vector<uint8_t> bytes;
  std::vector<std::vector<uint32_t>> by_byte(256);  // this anyOf's concrete alternatives per first byte
  for (uint32_t id = 0; id < g.nodes.size(); ++id) {
    if (g.nodes[id].kind != JsonNodeKind::kAnyOf) continue;
    // Flatten nested anyOf (acyclic, checked) into the distinct concrete alternatives, in order.
    concrete.clear();
    visited.clear();
    stack.assign(1, id);
    while (!stack.empty()) {
      const uint32_t a = stack.back();
      stack.pop_back();
      if (seen[a]) continue;
      seen[a] = 1;
      visited.push_back(a);
      const JsonNode& n = g.nodes[a];
      if (n.kind != JsonNodeKind::kAnyOf) {
        concrete.push_back(a);
        continue;
      }
      for (uint32_t i = n.count; i-- > 0;) stack.push_back(g.alternatives[n.first + i]);
    }
    for (const uint32_t a : visited) seen[a] = 0;
    // Bucketing by first byte costs what the table holds (a chain of n anyOf holds n^2 entries in all).
    for (auto& list : by_byte) list.clear();
    size_t entries = 0;
    for (const uint32_t a : concrete) {
      bytes.clear();
      append_start_bytes(g, g.nodes[a], bytes);
      for (const uint8_t b : bytes) by_byte[b].push_back(a);
      entries += bytes.size();
    }
    charge_table(visited.size() + 257 + entries);
    g.nodes[id].keys = uint32_t(g.dispatch_offsets.size());
    for (int b = 0; b < 256; ++b) {
      g.dispatch_offsets.push_back(uint32_t(g.dispatch_nodes.size()));
      g.dispatch_nodes.insert(g.dispatch_nodes.end(), by_byte[size_t(b)].begin(), by_byte[size_t(b)].end());
    }
    g.dispatch_offsets.push_back(uint32_t(g.dispatch_nodes.size()));
  }
}

std::shared_ptr<const JsonGrammar> JsonGrammarBuilder::finish(uint32_t root, JsonWhitespace whitespace) {
  check_anyof_cycles();
  const std::vector<uint8_t> productive = find_productive();
  AERIE_CHECK(productive[root], "json schema: ", grammar_->paths[root],
              " admits no value (its constraints contradict each other, or it requires an infinitely deep value)");
  prune(productive);
  build_key_tries();
  build_dispatch();
  grammar_->root = root;
  grammar_->whitespace = whitespace;
  return std::move(grammar_);
}

}  // namespace aerie
