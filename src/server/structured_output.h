// Structured output: the JSON schema the output is held to by token masks — from response_format
// (json_object, json_schema), structured_outputs.json / json_object (or guided_json), or, for chat, from
// tool_choice required / named (a call list, or the function's arguments) — or the choice list, and the
// engine constraint that enforces it over the model's vocabulary.
#pragma once

#include <memory>
#include <optional>
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
  std::optional<std::string> regex;         // instead of a schema: the whole output matches this regex
  GrammarSpec grammar;                      // instead of a schema: the output matches this grammar

  bool constrained() const { return !schema.is_null() || !choice.empty() || regex.has_value() || grammar.given(); }
};

// What the request's structured-output fields ask for (either endpoint; at most one is set, as
// read_structured_output_fields checks).
OutputSchema output_schema_for(const SamplingRequest& request);
// The same, or the forced tool calls; throws ApiError (400 naming the structured-output field) when both.
OutputSchema output_schema_for(const ChatRequest& request);

// The constraint for a schema (or a choice list), over the backend's vocabulary (built on first use). Throws
// ApiError (400, naming `param`) for a schema that uses what the constraint compiler does not support, or
// choices out of bounds.
std::shared_ptr<const TokenConstraint> make_output_constraint(Backend& backend, const OutputSchema& output,
                                                              const SchemaLimits& limits = {});

// With a reasoning parser: `inner` applied from the end of the <think> block, the block itself free
// (grammar/reasoning_constraint.h), so that `content` / tool_calls follow it and reasoning_content does not.
// `rendered`: the prompt (did it open or close a block); `skips_special`: the request's output text drops
// special tokens (it has no tool-call parser), as ChoiceStream decodes it.
std::shared_ptr<const TokenConstraint> make_after_reasoning(Backend& backend, const TokenConstraint& inner,
                                                            std::string_view rendered, bool skips_special);

}  // namespace aerie::server
