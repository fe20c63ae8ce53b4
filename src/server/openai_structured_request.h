// The structured-output fields of a request body, read the same way for /v1/chat/completions and
// /v1/completions (vLLM takes the same fields on both):
//   response_format                 {"type": "text" | "json_object" | "json_schema", "json_schema": {...}}
//   structured_outputs              {"json": schema (object or JSON text), "json_object": bool,
//                                    "choice": [strings], "regex": string, "disable_any_whitespace": bool}
//   guided_json, guided_choice,     vLLM's older top-level spellings of structured_outputs.json / .choice /
//   guided_regex                    .regex (a regex: the whole output matches it, grammar/regex_constraint.h)
//   grammar                         llama.cpp's GBNF grammar; structured_outputs.grammar and vLLM's older
//   guided_grammar                  guided_grammar take GBNF or the Lark subset (grammar/cfg_parse.h)
// One constraint per request: a second one (e.g. response_format json_schema and structured_outputs.json,
// or guided_json and structured_outputs.json) is refused with a 400 naming the later field. vLLM's other
// structured_outputs keys are refused by name rather than ignored, so a request never silently loses a
// constraint it asked for. Tool forcing (chat only) is checked against these in server/structured_output.
#pragma once

#include <nlohmann/json.hpp>

#include "server/openai_schema.h"

namespace aerie::server {

void read_structured_output_fields(const nlohmann::ordered_json& body, SamplingRequest& request);

}  // namespace aerie::server
