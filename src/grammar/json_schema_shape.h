// An over-approximation of the values a JSON schema accepts (its "shape"), for the oneOf check in
// json_schema.cpp: an alternative's outputs must be rejected by every other alternative, and a shape that
// surely rejects a value proves it. Shapes only ever err towards admitting: keywords they do not model
// (patterns, formats, not, dependencies, ...) are left out, which widens them.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "grammar/json_schema_merge.h"

namespace aerie {

enum JsonTypeBit : uint8_t {
  kTypeNull = 1,
  kTypeBoolean = 2,
  kTypeObject = 4,
  kTypeArray = 8,
  kTypeString = 16,
  kTypeNumber = 32,
  kTypeAll = 63
};

struct SchemaShape {
  uint8_t types = kTypeAll;
  bool integer_only = false;  // numbers must be integers
  // Exactly these values (when set); `types` then covers them.
  std::optional<std::vector<nlohmann::ordered_json>> values;
  // Objects must have these members, each within its shape.
  std::map<std::string, std::shared_ptr<const SchemaShape>> required;
  // Objects may only have members of these names (additionalProperties: false).
  std::optional<std::set<std::string>> names;
  // Bounds on strings (code points) and arrays (items).
  uint64_t min_length = 0, max_length = UINT64_MAX, min_items = 0, max_items = UINT64_MAX;
};

// The shape of `schema`; `depth_left` bounds the recursion (beyond it, anything).
SchemaShape schema_shape(const nlohmann::ordered_json& schema, const SchemaRefResolver& resolve, int depth_left);
// False when the shape surely rejects the value.
bool shape_may_admit(const SchemaShape& shape, const nlohmann::ordered_json& value);
uint8_t json_type_bit(const nlohmann::ordered_json& value);

}  // namespace aerie
