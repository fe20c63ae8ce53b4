// Limits on untrusted input, as policy in one place. Everything a client of `aerie serve` sends and
// everything read from a model folder is bounded by one of these: nesting depth, sizes, counts, time and
// integer range. Each limit, when hit, gives a clear error (an OpenAI error object with status 400/408/413,
// or a load error naming the file and the field) and never a crash, a hang or unbounded memory.
//
// The defaults are generous for real use (the largest published chat templates, tool schemas and
// tokenizer.json files stay far below them) and small enough that a hostile input costs at most seconds
// of CPU and tens of MiB. `aerie serve` can raise the request-side ones by flag (docs/limits.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace aerie {

// The HTTP layer, per request.
struct HttpLimits {
  size_t max_body_bytes = size_t{8} << 20;  // whole body, Content-Length or chunked: beyond it, 413
  size_t max_header_bytes = size_t{64} << 10;  // request line plus headers
  int header_deadline_s = 10;  // the request line and all headers must arrive within this (408 / close)
  int body_deadline_s = 60;    // the whole body must arrive within this after the headers (408 / close)
  int keep_alive_idle_s = 5;   // an idle keep-alive connection is closed after this
};

// JSON from clients (request bodies) and from model folders (config.json, tokenizer.json, ...).
struct JsonLimits {
  int max_depth = 128;                 // arrays/objects nested deeper: 400 (or a load error)
  size_t max_keys_per_object = 4096;   // one object's members; more: 400 (insertion order is kept, O(n) each)
  size_t max_string_bytes = size_t{8} << 20;
};

// The OpenAI fields of one request, beyond JSON's own limits: what each costs grows with the count (every
// stop string is matched after every token, every choice is a sequence in the engine). Beyond one: 400.
struct RequestLimits {
  int64_t max_choices = 128;        // n x prompts of one request (OpenAI's n is at most 128)
  size_t max_stop_sequences = 16;   // OpenAI allows 4
  size_t max_stop_bytes = 1024;     // one stop string
  size_t max_tools = 128;           // OpenAI's limit
  size_t max_logit_bias = 1024;     // logit_bias entries
};

// Structured output: a JSON schema (response_format, or the tools of a forced tool call) compiled into a
// grammar. Some shapes cost quadratic time and memory in the grammar's tables (a chain of anyOf through
// $ref, an object with thousands of optional properties), so the tables are bounded as well as the nesting.
struct SchemaLimits {
  int max_depth = 128;                       // schemas inside schemas (properties, items, anyOf, $ref hops)
  size_t max_nodes = 20000;                  // grammar nodes (about one per subschema and per property)
  size_t max_table_entries = size_t{1} << 22;  // anyOf first-byte dispatch and optional-key tries, in all
};

// The Jinja chat-template engine, per render. Integers are 64-bit: an operation whose exact (Python)
// result does not fit is an error, never undefined behaviour.
struct TemplateLimits {
  size_t max_output_bytes = size_t{4} << 20;   // the rendered prompt
  size_t max_value_bytes = size_t{4} << 20;    // any one string or list built while rendering
  int64_t max_loop_iterations = 1'000'000;     // all loop bodies of one render together
  int max_call_depth = 64;                     // macro / caller / recursive-loop nesting
  int max_parse_depth = 256;                   // expression and block nesting in the template source
  // Bytes built, copied or scanned by one render, each statement and expression step counting as a few
  // bytes: bounds its CPU time and memory where each single value and loop count is within the above
  // (a million iterations that each copy a 4 MiB string would otherwise take minutes).
  size_t max_work_bytes = size_t{256} << 20;
};

// Model folders from the internet.
struct LoadLimits {
  size_t max_json_file_bytes = size_t{512} << 20;        // config.json, tokenizer.json, index files
  size_t max_safetensors_header_bytes = size_t{100} << 20;  // the format's own cap (safetensors spec)
  int64_t max_vocab_size = int64_t{1} << 22;             // token ids (model and added) below this
  int max_tensor_rank = 8;
  // A torch.save file's data.pkl: what running it may build (values, container slots, strings, memo
  // entries; a state dict takes under 4 KiB per tensor) and how deeply its values may nest (a state dict
  // nests about 4 deep).
  size_t max_pickle_memory_bytes = size_t{256} << 20;
  int max_pickle_depth = 128;
};

// Every limit a server applies per request, by group; `aerie serve --limit GROUP.FIELD=VALUE,...` sets
// any of them (set_limit). Model-folder limits (LoadLimits) are fixed.
struct RequestSideLimits {
  HttpLimits http;
  JsonLimits json;
  RequestLimits request;
  SchemaLimits schema;
  TemplateLimits chat_template;
};

// Applies "group.field=value" (e.g. "json.max_depth=256"); the value must be a positive integer in the
// field's range. Throws aerie::Error naming the known limits for an unknown name.
void set_limit(RequestSideLimits& limits, std::string_view assignment);
// "group.field = value" lines for every settable limit (the help text and the table in docs/limits.md).
std::string describe_limits(const RequestSideLimits& limits);

}  // namespace aerie
