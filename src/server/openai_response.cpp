#include "server/openai_response.h"

namespace aerie::server {

std::string_view finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kToolCalls: return "tool_calls";
  }
  return "stop";
}

OrderedJson usage_json(const Usage& usage) {
  OrderedJson out = {{"prompt_tokens", usage.prompt_tokens},
                     {"completion_tokens", usage.completion_tokens},
                     {"total_tokens", usage.prompt_tokens + usage.completion_tokens}};
  if (usage.has_speculation) {
    const SpecStats& s = usage.speculation;
    OrderedJson spec = {{"rounds", s.rounds},
                        {"draft_tokens", s.draft_tokens},
                        {"accepted_tokens", s.accepted_tokens},
                        {"acceptance_rate", s.acceptance_rate()},
                        {"mean_acceptance_length", s.rounds > 0 ? s.mean_acceptance_length() : 0.0},
                        {"accepted_per_position", s.accepted_at},
                        {"relaxed_accepted", s.relaxed_accepted}};
    if (usage.synthetic_acceptance >= 0.0) spec["synthetic_acceptance"] = usage.synthetic_acceptance;
    out["speculation"] = std::move(spec);
  }
  return out;
}

std::string make_response_id(std::string_view prefix, std::mt19937_64& rng) {
  static constexpr std::string_view kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  std::string id(prefix);
  for (int i = 0; i < 29; ++i) id += kAlphabet[rng() % kAlphabet.size()];
  return id;
}

namespace {

OrderedJson utf8_bytes(std::string_view token) {
  OrderedJson bytes = OrderedJson::array();
  for (unsigned char c : token) bytes.push_back(static_cast<int>(c));
  return bytes;
}

OrderedJson finish_json(std::optional<FinishReason> reason) {
  return reason ? OrderedJson(finish_reason_name(*reason)) : OrderedJson(nullptr);
}

OrderedJson envelope(std::string_view id, std::string_view object, int64_t created, std::string_view model) {
  return {{"id", id}, {"object", object}, {"created", created}, {"model", model}};
}

}  // namespace

OrderedJson chat_logprobs_json(const std::vector<TokenLogprob>& tokens) {
  OrderedJson content = OrderedJson::array();
  for (const TokenLogprob& token : tokens) {
    OrderedJson top = OrderedJson::array();
    for (const TokenLogprobAlternative& alt : token.top) {
      top.push_back({{"token", alt.token},
                     {"logprob", alt.logprob},
                     {"bytes", utf8_bytes(alt.bytes.empty() ? alt.token : alt.bytes)}});
    }
    content.push_back({{"token", token.token},
                       {"logprob", token.logprob},
                       {"bytes", utf8_bytes(token.bytes.empty() ? token.token : token.bytes)},
                       {"top_logprobs", std::move(top)}});
  }
  return {{"content", std::move(content)}};
}

OrderedJson completion_logprobs_json(const std::vector<TokenLogprob>& tokens, int64_t text_offset_start) {
  OrderedJson text_tokens = OrderedJson::array(), token_logprobs = OrderedJson::array();
  OrderedJson top_logprobs = OrderedJson::array(), text_offset = OrderedJson::array();
  int64_t offset = text_offset_start;
  for (const TokenLogprob& token : tokens) {
    text_tokens.push_back(token.token);
    if (token.has_logprob) {
      token_logprobs.push_back(token.logprob);
      OrderedJson top = OrderedJson::object();
      for (const TokenLogprobAlternative& alt : token.top) top[alt.token] = alt.logprob;
      top_logprobs.push_back(std::move(top));
    } else {
      token_logprobs.push_back(nullptr);
      top_logprobs.push_back(nullptr);
    }
    if (token.text_offset) {
      text_offset.push_back(*token.text_offset);
    } else {
      text_offset.push_back(offset);
      offset += static_cast<int64_t>(token.token.size());
    }
  }
  return {{"tokens", std::move(text_tokens)},
          {"token_logprobs", std::move(token_logprobs)},
          {"top_logprobs", std::move(top_logprobs)},
          {"text_offset", std::move(text_offset)}};
}

OrderedJson chat_completion_json(std::string_view id, int64_t created, std::string_view model,
                                 const std::vector<ChatChoice>& choices, const Usage& usage,
                                 const OrderedJson& prompt_logprobs) {
  OrderedJson body = envelope(id, "chat.completion", created, model);
  OrderedJson out_choices = OrderedJson::array();
  for (const ChatChoice& choice : choices) {
    OrderedJson message = {{"role", "assistant"}};
    if (choice.reasoning_content)
      message["reasoning_content"] =
          choice.reasoning_content->empty() ? OrderedJson(nullptr) : OrderedJson(*choice.reasoning_content);
    const bool null_content = choice.content.empty() && !choice.tool_calls.empty();
    message["content"] = null_content ? OrderedJson(nullptr) : OrderedJson(choice.content);
    if (!choice.tool_calls.empty()) {
      OrderedJson calls = OrderedJson::array();
      for (const ToolCall& call : choice.tool_calls) {
        calls.push_back({{"id", call.id},
                         {"type", "function"},
                         {"function", {{"name", call.name}, {"arguments", call.arguments}}}});
      }
      message["tool_calls"] = std::move(calls);
    }
    out_choices.push_back({{"index", choice.index},
                           {"message", std::move(message)},
                           {"logprobs", choice.logprobs},
                           {"finish_reason", finish_reason_name(choice.finish_reason)}});
  }
  body["choices"] = std::move(out_choices);
  body["usage"] = usage_json(usage);
  if (!prompt_logprobs.is_null()) body["prompt_logprobs"] = prompt_logprobs;
  return body;
}

OrderedJson tool_call_delta_json(const ToolEvent& event) {
  OrderedJson delta = {{"index", event.tool_index}};
  if (!event.id.empty() || !event.name.empty()) {
    delta["id"] = event.id;
    delta["type"] = "function";
    delta["function"] = {{"name", event.name}, {"arguments", event.arguments}};
  } else {
    delta["function"] = {{"arguments", event.arguments}};
  }
  return delta;
}

OrderedJson chat_chunk_json(std::string_view id, int64_t created, std::string_view model, int index,
                            const ChatDelta& delta, std::optional<FinishReason> finish_reason,
                            const OrderedJson& logprobs, bool usage_field) {
  OrderedJson body = envelope(id, "chat.completion.chunk", created, model);
  OrderedJson out_delta = OrderedJson::object();
  if (delta.role) out_delta["role"] = "assistant";
  if (delta.reasoning_content) out_delta["reasoning_content"] = *delta.reasoning_content;
  if (delta.content) {
    out_delta["content"] = *delta.content;
  } else if (delta.role) {
    // OpenAI's first chunk: content "" before text, null before tool calls.
    out_delta["content"] = delta.tool_calls.empty() ? OrderedJson("") : OrderedJson(nullptr);
  }
  if (!delta.tool_calls.empty()) {
    OrderedJson calls = OrderedJson::array();
    for (const ToolEvent& event : delta.tool_calls) calls.push_back(tool_call_delta_json(event));
    out_delta["tool_calls"] = std::move(calls);
  }
  body["choices"] = OrderedJson::array({{{"index", index},
                                         {"delta", std::move(out_delta)},
                                         {"logprobs", logprobs},
                                         {"finish_reason", finish_json(finish_reason)}}});
  if (usage_field) body["usage"] = nullptr;
  return body;
}

OrderedJson chat_usage_chunk_json(std::string_view id, int64_t created, std::string_view model, const Usage& usage) {
  OrderedJson body = envelope(id, "chat.completion.chunk", created, model);
  body["choices"] = OrderedJson::array();
  body["usage"] = usage_json(usage);
  return body;
}

OrderedJson text_completion_json(std::string_view id, int64_t created, std::string_view model,
                                 const std::vector<CompletionChoice>& choices, const Usage& usage) {
  OrderedJson body = envelope(id, "text_completion", created, model);
  OrderedJson out_choices = OrderedJson::array();
  for (const CompletionChoice& choice : choices) {
    out_choices.push_back({{"index", choice.index},
                           {"text", choice.text},
                           {"logprobs", choice.logprobs},
                           {"finish_reason", finish_reason_name(choice.finish_reason)}});
    if (!choice.prompt_logprobs.is_null()) out_choices.back()["prompt_logprobs"] = choice.prompt_logprobs;
  }
  body["choices"] = std::move(out_choices);
  body["usage"] = usage_json(usage);
  return body;
}

OrderedJson text_completion_chunk_json(std::string_view id, int64_t created, std::string_view model, int index,
                                       std::string_view text, std::optional<FinishReason> finish_reason,
                                       const OrderedJson& logprobs, bool usage_field) {
  OrderedJson body = envelope(id, "text_completion", created, model);
  body["choices"] = OrderedJson::array(
      {{{"index", index}, {"text", text}, {"logprobs", logprobs}, {"finish_reason", finish_json(finish_reason)}}});
  if (usage_field) body["usage"] = nullptr;
  return body;
}

OrderedJson text_completion_usage_chunk_json(std::string_view id, int64_t created, std::string_view model,
                                             const Usage& usage) {
  OrderedJson body = envelope(id, "text_completion", created, model);
  body["choices"] = OrderedJson::array();
  body["usage"] = usage_json(usage);
  return body;
}

OrderedJson model_list_json(const std::vector<std::string>& model_names, int64_t created, std::string_view owned_by,
                            const std::vector<AdapterEntry>& adapters) {
  OrderedJson data = OrderedJson::array();
  for (const std::string& name : model_names) {
    data.push_back({{"id", name}, {"object", "model"}, {"created", created}, {"owned_by", owned_by}});
  }
  for (const AdapterEntry& a : adapters) {
    data.push_back({{"id", a.name},
                    {"object", "model"},
                    {"created", created},
                    {"owned_by", owned_by},
                    {"root", a.path},
                    {"parent", model_names.empty() ? std::string() : model_names[0]}});
  }
  return {{"object", "list"}, {"data", std::move(data)}};
}

std::string dump_json(const OrderedJson& value) {
  return value.dump(-1, ' ', /*ensure_ascii=*/false, nlohmann::ordered_json::error_handler_t::replace);
}

std::string sse_data(const OrderedJson& value) { return "data: " + dump_json(value) + "\n\n"; }

}  // namespace aerie::server
