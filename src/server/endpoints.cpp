#include "server/endpoints.h"

#include <algorithm>
#include <ctime>
#include <random>

#include "core/error.h"
#include "server/openai_fields.h"
#include "server/structured_output.h"

namespace aerie::server {
namespace {

using Json = nlohmann::ordered_json;

std::mt19937_64& thread_rng() {
  thread_local std::mt19937_64 rng([] {
    std::random_device device;
    return (uint64_t(device()) << 32) ^ uint64_t(device());
  }());
  return rng;
}

const Backend& backend_of(const EndpointContext& context) { return *context.backend; }

// The LoRA adapter a request's "model" selects: -1 for the served model (or no name), the index of a
// --lora-modules name, else 404 model_not_found (as vLLM answers an unknown adapter).
int32_t check_model(const EndpointContext& context, const std::string& model) {
  if (model.empty() || model == context.model_name) return -1;
  const auto& adapters = context.backend->model.lora_modules;
  for (size_t i = 0; i < adapters.size(); ++i)
    if (adapters[i].name == model) return int32_t(i);
  throw ApiError::model_not_found(model);
}

// The name a response reports: the adapter's when the request chose one, as vLLM does.
std::string served_name(const EndpointContext& context, int32_t adapter) {
  return adapter < 0 ? context.model_name : context.backend->model.lora_modules[size_t(adapter)].name;
}

SamplingParams sampling_of(const SamplingRequest& request) {
  SamplingParams params;
  params.temperature = request.temperature;
  params.top_k = request.top_k < 0 ? 0 : request.top_k;
  params.top_p = request.top_p;
  params.min_p = request.min_p;
  return params;
}

// With a seed, choice i uses seed + i: the same request reproduces, and its choices differ.
std::vector<uint64_t> seeds_for(const SamplingRequest& request, int64_t count) {
  std::vector<uint64_t> seeds;
  for (int64_t i = 0; i < count; ++i)
    seeds.push_back(request.seed ? uint64_t(*request.seed) + uint64_t(i) : fresh_seed());
  return seeds;
}

// max_tokens against the context: the prompt must leave room for one token, and prompt + max_tokens must
// fit. Absent: everything that is left (chat).
int64_t resolve_max_tokens(const Backend& backend, int64_t prompt_tokens, std::optional<int64_t> max_tokens,
                           const std::string& prompt_param) {
  const int64_t context = backend.max_length;
  if (prompt_tokens >= context) {
    throw ApiError::context_length_exceeded(context, prompt_tokens + max_tokens.value_or(1), prompt_param);
  }
  if (!max_tokens) return context - prompt_tokens;
  if (prompt_tokens + *max_tokens > context) {
    throw ApiError::context_length_exceeded(context, prompt_tokens + *max_tokens, "max_tokens");
  }
  return *max_tokens;
}

void check_vocab(const Backend& backend, const std::vector<int64_t>& ids, const std::string& param) {
  for (int64_t id : ids) {
    if (id >= backend.n_vocab) {
      fields::throw_invalid_value(param, "Invalid '" + param + "': token id " + std::to_string(id) +
                                             " is outside the model's vocabulary of " +
                                             std::to_string(backend.n_vocab) + " tokens.");
    }
  }
}

std::vector<int64_t> encode(const Tokenizer& tokenizer, const std::string& text, bool add_special, const std::string& param) {
  try {
    const std::vector<int32_t> ids = tokenizer.encode(text, add_special);
    return {ids.begin(), ids.end()};
  } catch (const Error& e) {
    throw ApiError::invalid_request(std::string("Invalid '") + param + "': " + e.what(), param, "invalid_value");
  }
}

std::string render_chat(const Backend& backend, const ChatRequest& request, bool add_generation_prompt) {
  if (!backend.chat_template) {
    throw ApiError::invalid_request("This model has no chat template (tokenizer_config.json has no chat_template); "
                                    "use /v1/completions.", "messages", "invalid_value");
  }
  const TokenizerConfig& config = backend.model.tokenizer->config();
  ChatOptions options;
  options.add_generation_prompt = add_generation_prompt;
  options.bos_token = config.bos_token;
  options.eos_token = config.eos_token;
  options.tools = request.tools;
  options.extra = request.chat_template_kwargs;
  try {
    return apply_chat_template(*backend.chat_template, request.messages, options);
  } catch (const Error& e) {
    throw ApiError::invalid_request(std::string("The chat template could not render the messages: ") + e.what(),
                                    "messages", "invalid_value");
  }
}

// Request priorities are integers of at most this magnitude (any ordering a client needs; no overflow).
constexpr int64_t kMaxPriority = int64_t(1) << 40;

RequestOptions request_options(const Backend& backend, const SamplingRequest& request, const Json& body) {
  RequestOptions options;
  options.sampling = sampling_of(request);
  options.logit_bias = fields::checked_logit_bias(request, backend.n_vocab);
  options.penalties.presence = request.presence_penalty;
  options.penalties.frequency = request.frequency_penalty;
  options.penalties.repetition = request.repetition_penalty;
  // The sampled token's log-probability and the top_logprobs most likely (the model's own distribution).
  options.logprobs = request.logprobs ? request.top_logprobs : -1;
  options.stop_token_ids = backend.model.eos_ids;
  // vLLM's extension: keep generating through end-of-sequence tokens (benchmarks, load tests).
  options.ignore_eos = fields::get_bool(body, "ignore_eos", "ignore_eos").value_or(false);
  if (options.ignore_eos) options.stop_token_ids.clear();
  // aerie's extension: batch-invariant decoding for this request (RequestOptions::deterministic).
  options.deterministic = fields::get_bool(body, "deterministic", "deterministic").value_or(false);
  // vLLM's priority (lower first), with --scheduling-policy priority only.
  options.priority = fields::get_integer(body, "priority", "priority", -kMaxPriority, kMaxPriority).value_or(0);
  if (options.priority != 0 && !backend.model.priority_scheduling) {
    throw ApiError::invalid_request("priority is " + std::to_string(options.priority) +
                                        ", but this server schedules first come, first served (start it with "
                                        "--scheduling-policy priority to use request priorities).",
                                    "priority");
  }
  return options;
}

}  // namespace

std::string new_response_id(std::string_view prefix) { return make_response_id(prefix, thread_rng()); }

uint64_t fresh_seed() { return thread_rng()() | 1u; }

std::shared_ptr<Generation> make_chat_generation(const EndpointContext& context, std::string_view body, bool& stream) {
  return make_chat_generation_from_json(context, fields::parse_body(body, context.json_limits), stream);
}

std::shared_ptr<Generation> make_chat_generation_from_json(const EndpointContext& context, const OrderedJson& json,
                                                           bool& stream, const std::string& id) {
  const Backend& backend = backend_of(context);
  const ChatRequest request = chat_request_from_json(json, context.request_limits);
  const int32_t adapter = check_model(context, request.model);

  GenerationPlan plan;
  const OutputSchema output = output_schema_for(request);
  const bool tools = request.tools.is_array() && !request.tools.empty() && request.tool_choice.mode == ToolChoiceMode::kAuto;
  if (tools) {
    if (!backend.model.tool_parser) {
      throw ApiError::invalid_request("Tool calling needs a tool-call parser and none was detected for this model: "
                                      "start aerie serve with --tool-parser (deepseek_v3, deepseek_v31 or "
                                      "llama3_json).", "tools", "unsupported_parameter");
    }
    plan.tool_parser = backend.model.tool_parser;
  }
  GenerationPrompt prompt;
  const std::string rendered = render_chat(backend, request, true);
  prompt.ids = encode(*backend.model.tokenizer, rendered, false, "messages");
  plan.reasoning = backend.model.reasoning_parser.has_value();
  plan.starts_in_reasoning = plan.reasoning && prompt_opens_reasoning(rendered);
  if (prompt.ids.empty()) throw ApiError::invalid_request("The messages render to an empty prompt.", "messages");

  plan.chat = true;
  plan.id = id.empty() ? new_response_id("chatcmpl-") : id;
  plan.request_id = context.request_id;
  plan.created = int64_t(std::time(nullptr));
  plan.model = served_name(context, adapter);
  plan.n = request.n;
  plan.options = request_options(backend, request, json);
  plan.options.adapter = adapter;
  plan.options.max_tokens = resolve_max_tokens(backend, int64_t(prompt.ids.size()), request.max_tokens, "messages");
  plan.prompt_logprobs = plan.options.prompt_logprobs = request.prompt_logprobs.value_or(-1);
  if (output.constrained()) {
    plan.options.constraint = make_output_constraint(*context.backend, output, context.schema_limits);
    // A reasoning model thinks freely; the structure applies from the end of its <think> block.
    if (plan.reasoning) {
      const bool skips_special = output.forced == ForcedTools::kNone && !plan.tool_parser;
      plan.options.constraint = make_after_reasoning(*context.backend, *plan.options.constraint, rendered,
                                                     skips_special);
    }
  }
  plan.forced_tools = output.forced;
  plan.forced_function = output.function;
  plan.prompts.push_back(std::move(prompt));
  plan.seeds = seeds_for(request, plan.n);
  plan.stop = request.stop;
  plan.tool_call_id_seed = request.seed ? uint64_t(*request.seed) : fresh_seed();
  plan.stream = request.stream;
  plan.include_usage = request.include_usage;
  plan.include_speculation = request.include_speculation;
  plan.options.starts_in_thinking = backend.model.relaxed_thinking.has_value() && prompt_opens_reasoning(rendered);
  stream = request.stream;
  return std::make_shared<Generation>(context.backend, std::move(plan), context.log);
}

std::shared_ptr<Generation> make_completion_generation(const EndpointContext& context, std::string_view body,
                                                       bool& stream) {
  const Backend& backend = backend_of(context);
  const Json json = fields::parse_body(body, context.json_limits);
  const CompletionRequest request = completion_request_from_json(json, context.request_limits);
  const int32_t adapter = check_model(context, request.model);
  GenerationPlan plan;
  plan.chat = false;
  plan.options = request_options(backend, request, json);
  plan.options.adapter = adapter;
  // Echo with logprobs reports the echoed prompt's tokens too (OpenAI's legacy shape); the engine computes
  // the larger k of that and vLLM's prompt_logprobs once.
  plan.prompt_logprobs = request.prompt_logprobs.value_or(-1);
  plan.echo_logprobs = request.echo && request.logprobs ? request.top_logprobs : -1;
  plan.options.prompt_logprobs = std::max(plan.prompt_logprobs, plan.echo_logprobs);
  int64_t longest = 0;
  for (size_t p = 0; p < request.prompts.size(); ++p) {
    const CompletionPrompt& source = request.prompts[p];
    const std::string param = request.prompts.size() == 1 ? "prompt" : "prompt[" + std::to_string(p) + "]";
    GenerationPrompt prompt;
    if (source.is_tokens) {
      prompt.ids.assign(source.token_ids.begin(), source.token_ids.end());
      check_vocab(backend, prompt.ids, param);
    } else {
      prompt.ids = encode(*backend.model.tokenizer, source.text, true, param);
    }
    if (prompt.ids.empty()) throw ApiError::invalid_request("Invalid '" + param + "': the prompt is empty.", param, "invalid_value");
    if (request.echo) {
      const std::vector<int32_t> ids(prompt.ids.begin(), prompt.ids.end());
      prompt.echo = source.is_tokens ? backend.model.tokenizer->decode(ids) : source.text;
      prompt.echo_is_text = !source.is_tokens;
    }
    longest = std::max(longest, int64_t(prompt.ids.size()));
    resolve_max_tokens(backend, int64_t(prompt.ids.size()), request.max_tokens, param);
    plan.prompts.push_back(std::move(prompt));
  }
  plan.id = new_response_id("cmpl-");
  plan.request_id = context.request_id;
  plan.created = int64_t(std::time(nullptr));
  plan.model = served_name(context, adapter);
  plan.n = request.n;
  plan.options.max_tokens = resolve_max_tokens(backend, longest, request.max_tokens, "prompt");
  if (const OutputSchema output = output_schema_for(static_cast<const SamplingRequest&>(request)); output.constrained())
    plan.options.constraint = make_output_constraint(*context.backend, output, context.schema_limits);
  plan.seeds = seeds_for(request, plan.n * int64_t(plan.prompts.size()));
  plan.stop = request.stop;
  plan.stream = request.stream;
  plan.include_usage = request.include_usage;
  plan.include_speculation = request.include_speculation;
  stream = request.stream;
  return std::make_shared<Generation>(context.backend, std::move(plan), context.log);
}

OrderedJson tokenize_body(const EndpointContext& context, std::string_view body) {
  const Backend& backend = backend_of(context);
  const Json json = fields::parse_body(body, context.json_limits);
  if (auto model = fields::get_string(json, "model", "model")) check_model(context, *model);
  std::vector<int64_t> ids;
  if (fields::find(json, "messages")) {
    const ChatRequest request = chat_request_from_json(json, context.request_limits);
    const bool generation_prompt = fields::get_bool(json, "add_generation_prompt", "add_generation_prompt").value_or(true);
    ids = encode(*backend.model.tokenizer, render_chat(backend, request, generation_prompt), false, "messages");
  } else {
    const auto prompt = fields::get_string(json, "prompt", "prompt");
    if (!prompt) fields::throw_missing("prompt");
    const bool special = fields::get_bool(json, "add_special_tokens", "add_special_tokens").value_or(true);
    ids = encode(*backend.model.tokenizer, *prompt, special, "prompt");
  }
  return {{"count", ids.size()}, {"max_model_len", backend.max_length}, {"tokens", ids}};
}

OrderedJson detokenize_body(const EndpointContext& context, std::string_view body) {
  const Backend& backend = backend_of(context);
  const Json json = fields::parse_body(body, context.json_limits);
  if (auto model = fields::get_string(json, "model", "model")) check_model(context, *model);
  const Json* tokens = fields::get_array(json, "tokens", "tokens");
  if (!tokens) fields::throw_missing("tokens");
  std::vector<int32_t> ids;
  for (size_t i = 0; i < tokens->size(); ++i) {
    const Json& id = (*tokens)[i];
    const std::string param = "tokens[" + std::to_string(i) + "]";
    if (!id.is_number_integer()) fields::throw_invalid_type(param, "an integer", id);
    if (id.get<int64_t>() < 0 || id.get<int64_t>() >= backend.n_vocab) {
      fields::throw_invalid_value(param, "Invalid '" + param + "': token id " + id.dump() + " is outside the vocabulary.");
    }
    ids.push_back(int32_t(id.get<int64_t>()));
  }
  return {{"prompt", backend.model.tokenizer->decode(ids)}};
}

}  // namespace aerie::server
