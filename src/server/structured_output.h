// Structured output for chat requests: the JSON schema the output is held to by token masks — from
// response_format (json_object, json_schema) or from tool_choice required / named (a call list, or the
// function's arguments) — or a choice list or a grammar instead, and the engine constraint that enforces
// it over the model's vocabulary.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sample/token_constraint.h"
#include "server/backend.h"
#include "server/generation.h"
#include "server/openai_schema.h"

namespace aerie::server {

struct OutputSchema {
  nlohmann::ordered_json schema = nullptr;  // null: the output is free
  std::string param;                        // the request field the schema comes from (for errors)
  ForcedTools forced = ForcedTools::kNone;
  std::string function;                     // kNamed
  bool any_whitespace = false;              // whitespace between JSON tokens (default: compact)
  std::vector<std::string> choice;          // instead of a schema: the output is exactly one of these
  GrammarSpec grammar;                      // instead of a schema: the output matches this grammar

  bool constrained() const { return !schema.is_null() || !choice.empty() || grammar.given(); }
};

// Throws ApiError (400) when response_format asks for JSON while tool_choice forces calls, or a choice list
// or a grammar comes with either (or with each other).
OutputSchema output_schema_for(const ChatRequest& request);

// The constraint for a schema (or a choice list, or a grammar), over the backend's vocabulary (built on first
// use). Throws ApiError (400, naming `param`) for a schema that uses what the constraint compiler does not
// support, choices out of bounds, or a grammar that does not parse or compile (the message names the line
// and column).
std::shared_ptr<const TokenConstraint> make_output_constraint(Backend& backend, const OutputSchema& output,
                                                              const SchemaLimits& limits = {});

}  // namespace aerie::server
