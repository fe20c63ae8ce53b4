// What the schema compiler settles once the whole graph exists (json_schema_compiler.h): enum values kept
// only where the rest of their schema admits them, uniqueItems over literal items, and oneOf shown exact.
#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/error.h"
#include "grammar/json_schema_compiler.h"
#include "grammar/json_schema_merge.h"

namespace aerie::json_schema_detail {

// uniqueItems: the items node (through anyOf of one) must be a literal node; its values are grouped by
// JSON equality (1 and 1.0 are one value) and numbered, and the matcher forbids the used ones.
void SchemaCompiler::settle_unique(const PendingUnique& u) {
  const JsonGrammar& g = builder_.grammar();
  // The items' literals, through anyOf (acyclic by now: e.g. {"type": ["boolean", "null"]}), each once.
  std::vector<std::string> literals;
  std::set<std::string> seen_literals;
  std::set<uint32_t> seen_nodes;
  std::vector<uint32_t> work{g.nodes[u.array].child};
  while (!work.empty()) {
    const uint32_t id = work.back();
    work.pop_back();
    if (!seen_nodes.insert(id).second) continue;
    const JsonNode& n = g.nodes[id];
    charge_admits(id, 1 + n.count);
    AERIE_CHECK(n.kind == JsonNodeKind::kLiteral || n.kind == JsonNodeKind::kAnyOf,
                "json schema: unsupported keyword \"uniqueItems\" at ", u.path,
                ": only arrays of enum values, booleans or nulls (or anyOf of those) are supported");
    for (uint32_t i = n.kind == JsonNodeKind::kAnyOf ? n.count : 0; i-- > 0;)
      work.push_back(g.alternatives[n.first + i]);
    if (n.kind == JsonNodeKind::kLiteral)
      for (std::string& l : literal_strings(id))
        if (seen_literals.insert(l).second) literals.push_back(std::move(l));
    AERIE_CHECK(literals.size() <= 64, "json schema: unsupported keyword \"uniqueItems\" at ", u.path,
                ": the items have more than 64 values (at most 64 are supported)");
  }
  std::vector<Json> distinct;
  std::vector<int32_t> values;
  for (const std::string& l : literals) {
    const Json v = Json::parse(l);
    const auto it = std::find_if(distinct.begin(), distinct.end(),
                                 [&](const Json& w) { return json_values_equal(v, w); });
    values.push_back(int32_t(it - distinct.begin()));
    if (it == distinct.end()) distinct.push_back(v);
  }
  const uint32_t literal = builder_.add_literal({}, u.path + " (unique items)");
  builder_.set_literals(literal, literals, values);
  JsonNode& array = builder_.node(u.array);
  array.child = literal;
  array.unique = true;
  array.max = std::min<uint32_t>(array.max, uint32_t(distinct.size()));
}

// The serialisations a literal node admits (bounded by the admits budget).
std::vector<std::string> SchemaCompiler::literal_strings(uint32_t node) {
  const JsonGrammar& g = builder_.grammar();
  std::vector<std::string> out;
  if (g.nodes[node].child == kJsonNoNode) return out;
  std::vector<std::pair<uint32_t, std::string>> work{{g.nodes[node].child, std::string()}};
  while (!work.empty()) {
    auto [state, text] = std::move(work.back());
    work.pop_back();
    const JsonLiteralState& s = g.literal_states[state];
    charge_admits(node, 1 + text.size());
    if (s.value >= 0) out.push_back(text);
    for (uint32_t e = s.n_edges; e-- > 0;) {
      const JsonLiteralEdge& edge = g.literal_edges[s.first_edge + e];
      work.emplace_back(edge.target, text + char(edge.byte));
    }
  }
  return out;
}

// oneOf is exact when no value an alternative produces is valid against another alternative: each
// alternative's node is checked against each other alternative's shape (an over-approximation of what
// that schema accepts, json_schema_shape.h). Alternatives that cannot be told apart so are refused.
void SchemaCompiler::check_one_of(const PendingOneOf& o) {
  const auto resolve = [this](const std::string& at, const Json& ref) -> const Json& {
    return resolve_target(at, ref);
  };
  std::vector<SchemaShape> shapes;
  for (const Json* s : o.schemas) shapes.push_back(schema_shape(*s, resolve, limits_.max_depth));
  for (size_t i = 0; i < o.nodes.size(); ++i)
    for (size_t j = 0; j < o.nodes.size(); ++j)
      AERIE_CHECK(i == j || disjoint(o.nodes[i], shapes[j], 0), "json schema: unsupported keyword \"oneOf\" at ",
                  o.path, ": alternatives ", i, " and ", j,
                  " may both match a value (aerie supports oneOf whose alternatives "
                  "are told apart by type, by enum/const values, or by a required property whose values differ)");
}

// No value the node produces is admitted by the shape (false when unsure).
bool SchemaCompiler::disjoint(uint32_t id, const SchemaShape& other, int depth) {
  if (depth > limits_.max_depth) return false;
  const JsonGrammar& g = builder_.grammar();
  const JsonNode& n = g.nodes[id];
  charge_admits(id, 1 + n.count);
  if (other.types == 0) return true;
  // A finite shape: none of its values is produced by the node.
  if (other.values &&
      std::none_of(other.values->begin(), other.values->end(), [&](const Json& v) { return admits(id, v, 0); }))
    return true;
  switch (n.kind) {
    case JsonNodeKind::kAnyOf:
      for (uint32_t i = 0; i < n.count; ++i)
        if (!disjoint(g.alternatives[n.first + i], other, depth + 1)) return false;
      return true;
    case JsonNodeKind::kLiteral:
      for (const std::string& l : literal_strings(id))
        if (shape_may_admit(other, Json::parse(l))) return false;
      return true;
    case JsonNodeKind::kString:
      return !(other.types & kTypeString) || n.max < other.min_length || n.min > other.max_length;
    case JsonNodeKind::kNumber: return !(other.types & kTypeNumber);
    case JsonNodeKind::kArray: return !(other.types & kTypeArray) || n.max < other.min_items || n.min > other.max_items;
    case JsonNodeKind::kObject: {
      if (!(other.types & kTypeObject)) return true;
      if (n.map) return false;
      // A required member of the shape that the node never writes, or writes with values the shape's
      // member rejects; or a member the node always writes that the shape does not allow.
      for (const auto& [name, member] : other.required) {
        const JsonProperty* p = nullptr;
        for (uint32_t i = 0; i < n.count && p == nullptr; ++i)
          if (g.properties[n.first + i].name == name) p = &g.properties[n.first + i];
        if (p == nullptr) return true;
        if (p->required && disjoint(p->value, *member, depth + 1)) return true;
      }
      if (other.names)
        for (uint32_t i = 0; i < n.count; ++i)
          if (g.properties[n.first + i].required && !other.names->count(g.properties[n.first + i].name)) return true;
      return false;
    }
  }
  return false;
}

// Whether the compiled node admits the value (the enum filter): the same semantics as the grammar, on a
// parsed value. Literal nodes compare serialisations. `depth` counts anyOf hops and value nesting: an anyOf
// chain built from $refs compiled in reverse order can be as long as the schema is, however shallow each
// compile_at was. Work is counted too: anyOf alternatives that share their alternatives (a diamond per
// level) would otherwise be walked 2^depth times.
void SchemaCompiler::charge_admits(uint32_t id, size_t steps) const {
  admits_steps_ += steps;
  AERIE_CHECK(admits_steps_ <= limits_.max_table_entries, "json schema: checking the enum values against ",
              builder_.grammar().paths[id], " takes more than ", limits_.max_table_entries, " steps");
}

bool SchemaCompiler::admits(uint32_t id, const Json& value, int depth) const {
  AERIE_CHECK(depth <= 2 * limits_.max_depth, "json schema: ", builder_.grammar().paths[id], " is nested too deeply (",
              "anyOf or $ref chains longer than ", 2 * limits_.max_depth, ") to check enum values against it");
  const JsonGrammar& g = builder_.grammar();
  const JsonNode& n = g.nodes[id];
  charge_admits(id, 1 + (value.is_object() || value.is_array() ? value.size() : 0) + n.count);
  switch (n.kind) {
    case JsonNodeKind::kAnyOf:
      for (uint32_t i = 0; i < n.count; ++i)
        if (admits(g.alternatives[n.first + i], value, depth + 1)) return true;
      return false;
    case JsonNodeKind::kLiteral: {
      if (n.child == kJsonNoNode) return false;
      uint32_t state = n.child;
      const std::string text = value.dump();
      charge_admits(id, text.size());
      for (const char c : text) {
        state = g.literal_step(state, uint8_t(c));
        if (state == kJsonNoNode) break;
      }
      if (state != kJsonNoNode && g.literal_states[state].value >= 0) return true;
      // Equal values can be spelled apart (1 and 1.0, objects with their keys in another order): compare
      // as JSON Schema does. oneOf's disjointness check relies on this never missing an equal value.
      if (!value.is_number() && !value.is_object() && !value.is_array()) return false;
      std::vector<std::pair<uint32_t, std::string>> work{{n.child, std::string()}};
      while (!work.empty()) {
        auto [at, prefix] = std::move(work.back());
        work.pop_back();
        const JsonLiteralState& s = g.literal_states[at];
        charge_admits(id, 1 + prefix.size());
        if (s.value >= 0 && json_values_equal(Json::parse(prefix), value)) return true;
        for (uint32_t e = 0; e < s.n_edges; ++e)
          work.emplace_back(g.literal_edges[s.first_edge + e].target,
                            prefix + char(g.literal_edges[s.first_edge + e].byte));
      }
      return false;
    }
    case JsonNodeKind::kString: {
      if (!value.is_string()) return false;
      const std::string& text = value.get_ref<const std::string&>();
      const size_t length = utf8_length(text);
      return length >= n.min && length <= n.max && (n.pattern == kJsonNoNode || g.patterns[n.pattern].matches(text));
    }
    case JsonNodeKind::kNumber: {
      if (!value.is_number()) return false;
      const double v = value.get<double>();
      if (n.integer && !value.is_number_integer() && !(std::isfinite(v) && std::floor(v) == v)) return false;
      const bool above_lo = n.lo_exclusive ? v > double(n.lo) : v >= double(n.lo);
      const bool below_hi = n.hi_exclusive ? v < double(n.hi) : v <= double(n.hi);
      if (n.multiple_of != 0) {  // an integer: exact in int64 below 2^61, the grammar's range
        if (!(std::fabs(v) < double(kJsonUnbounded))) return false;
        const int64_t i = value.is_number_integer() ? value.get<int64_t>() : int64_t(v);
        if (i % int64_t(n.multiple_of) != 0) return false;
      }
      return !n.bounded || (above_lo && below_hi);
    }
    case JsonNodeKind::kArray: {
      if (!value.is_array() || value.size() < n.min || value.size() > n.max) return false;
      for (size_t i = 0; i < value.size(); ++i) {
        const uint32_t item = i < n.count ? g.tuple_items[n.first + i] : n.child;
        if (!admits(item, value[i], depth + 1)) return false;
        for (size_t j = 0; j < i && n.unique; ++j)
          if (json_values_equal(value[i], value[j])) return false;
      }
      return true;
    }
    case JsonNodeKind::kObject: {
      if (!value.is_object() || value.size() < n.min || value.size() > n.max) return false;
      if (n.map) {
        for (const auto& [key, v] : value.items())
          if (!admits(n.child, v, depth + 1)) return false;
        return true;
      }
      // By name, through a map: both sides may hold thousands of members. Keys of a value are distinct,
      // so every required property is present when as many required ones matched as there are.
      std::unordered_map<std::string_view, const JsonProperty*> by_name;
      size_t n_required = 0, required_seen = 0;
      for (uint32_t i = 0; i < n.count; ++i) {
        by_name.emplace(g.properties[n.first + i].name, &g.properties[n.first + i]);
        n_required += g.properties[n.first + i].required ? 1 : 0;
      }
      for (const auto& [key, v] : value.items()) {
        const auto it = by_name.find(key);
        if (it == by_name.end() || !admits(it->second->value, v, depth + 1)) return false;
        required_seen += it->second->required ? 1 : 0;
        for (const std::string& d : it->second->dependencies)
          if (!value.contains(d)) return false;
      }
      return required_seen == n_required;
    }
  }
  return false;
}

}  // namespace aerie::json_schema_detail
