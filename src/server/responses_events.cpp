#include "server/responses_events.h"

#include <algorithm>
#include <ctime>

#include "server/endpoints.h"
#include "server/openai_response.h"

namespace aerie::server {

using Json = nlohmann::ordered_json;

namespace {

Json output_text_part(const std::string& text) {
  return {{"type", "output_text"}, {"text", text}, {"annotations", Json::array()}, {"logprobs", Json::array()}};
}

Json reasoning_part(const std::string& text) { return {{"type", "reasoning_text"}, {"text", text}}; }

std::string string_or_empty(const Json& object, const char* key) {
  const auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : std::string();
}

}  // namespace

ResponseBuilder::ResponseBuilder(ResponsesRequest request, std::string id, int64_t created_at, std::string model,
                                 TokenCounter count_tokens)
    : request_(std::move(request)),
      id_(std::move(id)),
      created_at_(created_at),
      model_(std::move(model)),
      count_tokens_(std::move(count_tokens)) {}

void ResponseBuilder::event(std::string* sse, const char* type, Json fields) {
  if (sse == nullptr) return;
  Json event = {{"type", type}};
  for (auto& [key, value] : fields.items()) event[key] = std::move(value);
  event["sequence_number"] = sequence_++;
  *sse += "event: ";
  *sse += type;
  *sse += '\n';
  *sse += sse_data(event);
}

Json ResponseBuilder::item_json(const Item& item, bool in_progress) const {
  // The last item of a response cut short by max_output_tokens is incomplete, as OpenAI marks it.
  const bool cut = finished_ && status() == "incomplete" && &item == &items_.back();
  const char* status = in_progress ? "in_progress" : cut ? "incomplete" : "completed";
  switch (item.kind) {
    case Kind::kMessage:
      return {{"id", item.id},
              {"type", "message"},
              {"status", status},
              {"role", "assistant"},
              {"content", in_progress ? Json::array() : Json::array({output_text_part(item.text)})}};
    case Kind::kReasoning:
      return {{"id", item.id},
              {"type", "reasoning"},
              {"status", status},
              {"summary", Json::array()},
              {"content", in_progress ? Json::array() : Json::array({reasoning_part(item.text)})}};
    case Kind::kCall:
      return {{"id", item.id},           {"type", "function_call"},
              {"status", status},        {"arguments", in_progress ? std::string() : item.text},
              {"call_id", item.call_id}, {"name", item.name}};
  }
  return nullptr;
}

void ResponseBuilder::open(Item item, std::string* sse) {
  close_open(sse);
  items_.push_back(std::move(item));
  open_ = int(items_.size()) - 1;
  const Item& opened = items_.back();
  event(sse, "response.output_item.added", {{"output_index", open_}, {"item", item_json(opened, true)}});
  if (opened.kind == Kind::kCall) return;
  event(sse, "response.content_part.added",
        {{"item_id", opened.id},
         {"output_index", open_},
         {"content_index", 0},
         {"part", opened.kind == Kind::kMessage ? output_text_part("") : reasoning_part("")}});
}

void ResponseBuilder::close_open(std::string* sse) {
  if (open_ < 0) return;
  Item& item = items_[size_t(open_)];
  const int index = open_;
  open_ = -1;
  item.done = true;
  const Json where = {{"item_id", item.id}, {"output_index", index}};
  auto with = [&](Json extra) {
    Json fields = where;
    for (auto& [key, value] : extra.items()) fields[key] = std::move(value);
    return fields;
  };
  if (item.kind == Kind::kMessage) {
    event(sse, "response.output_text.done",
          with({{"content_index", 0}, {"text", item.text}, {"logprobs", Json::array()}}));
    event(sse, "response.content_part.done", with({{"content_index", 0}, {"part", output_text_part(item.text)}}));
  } else if (item.kind == Kind::kReasoning) {
    event(sse, "response.reasoning_text.done", with({{"content_index", 0}, {"text", item.text}}));
    event(sse, "response.content_part.done", with({{"content_index", 0}, {"part", reasoning_part(item.text)}}));
  } else {
    event(sse, "response.function_call_arguments.done", with({{"name", item.name}, {"arguments", item.text}}));
  }
  // The item as the final response will show it (finish() has not run yet: "completed" for now).
  event(sse, "response.output_item.done", {{"output_index", index}, {"item", item_json(item, false)}});
}

void ResponseBuilder::text(Kind kind, const std::string& fragment, std::string* sse) {
  if (fragment.empty()) return;  // the chat stream's role chunk carries content ""
  if (open_ < 0 || items_[size_t(open_)].kind != kind) {
    Item item;
    item.kind = kind;
    item.id = new_response_id(kind == Kind::kMessage ? "msg_" : "rs_");
    open(std::move(item), sse);
  }
  Item& item = items_[size_t(open_)];
  item.text += fragment;
  const Json where = {{"item_id", item.id}, {"output_index", open_}, {"content_index", 0}, {"delta", fragment}};
  if (kind == Kind::kMessage) {
    Json fields = where;
    fields["logprobs"] = Json::array();
    event(sse, "response.output_text.delta", std::move(fields));
  } else {
    event(sse, "response.reasoning_text.delta", where);
  }
}

void ResponseBuilder::call_start(int index, const std::string& call_id, const std::string& name, std::string* sse) {
  Item item;
  item.kind = Kind::kCall;
  item.id = new_response_id("fc_");
  item.call_id = call_id;
  item.name = name;
  open(std::move(item), sse);
  calls_[index] = size_t(open_);
}

void ResponseBuilder::call_arguments(int index, const std::string& fragment, std::string* sse) {
  const auto it = calls_.find(index);
  if (it == calls_.end() || fragment.empty()) return;
  Item& item = items_[it->second];
  item.text += fragment;
  event(sse, "response.function_call_arguments.delta",
        {{"item_id", item.id}, {"output_index", int(it->second)}, {"delta", fragment}});
}

void ResponseBuilder::start(std::string& sse) {
  event(&sse, "response.created", {{"response", response()}});
  event(&sse, "response.in_progress", {{"response", response()}});
}

void ResponseBuilder::on_chunk(const Json& chunk, std::string& sse) {
  if (const auto error = chunk.find("error"); error != chunk.end()) {
    error_ = {{"code", "server_error"}, {"message", string_or_empty(*error, "message")}};
    return;
  }
  if (const auto usage = chunk.find("usage"); usage != chunk.end() && usage->is_object()) usage_ = *usage;
  const auto choices = chunk.find("choices");
  if (choices == chunk.end()) return;
  for (const Json& choice : *choices) {
    if (!choice.contains("delta")) continue;
    const Json& delta = choice["delta"];
    text(Kind::kReasoning, string_or_empty(delta, "reasoning_content"), &sse);
    text(Kind::kMessage, string_or_empty(delta, "content"), &sse);
    if (const auto calls = delta.find("tool_calls"); calls != delta.end() && calls->is_array()) {
      for (const Json& call : *calls) {
        const int index = call.value("index", 0);
        const Json function = call.value("function", Json::object());
        if (call.contains("id"))
          call_start(index, string_or_empty(call, "id"), string_or_empty(function, "name"), &sse);
        call_arguments(index, string_or_empty(function, "arguments"), &sse);
      }
    }
    if (choice.contains("finish_reason") && choice["finish_reason"].is_string())
      finish_reason_ = choice["finish_reason"].get<std::string>();
  }
}

void ResponseBuilder::end(std::string* sse) {
  // An output with nothing in it is still a message (with empty text), so output_text is always there.
  if (items_.empty() && error_.is_null()) {
    Item item;
    item.id = new_response_id("msg_");
    open(std::move(item), sse);
  }
  finished_ = true;  // first: the last item's output_item.done already says whether it was cut short
  completed_at_ = int64_t(std::time(nullptr));
  close_open(sse);
}

void ResponseBuilder::finish(std::string& sse) {
  end(&sse);
  const std::string final_status = status();
  const char* type = final_status == "failed"       ? "response.failed"
                     : final_status == "incomplete" ? "response.incomplete"
                                                    : "response.completed";
  event(&sse, type, {{"response", response()}});
}

void ResponseBuilder::from_completion(const Json& completion) {
  const Json& choice = completion.at("choices").at(0);
  const Json& message = choice.at("message");
  text(Kind::kReasoning, string_or_empty(message, "reasoning_content"), nullptr);
  text(Kind::kMessage, string_or_empty(message, "content"), nullptr);
  if (const auto calls = message.find("tool_calls"); calls != message.end() && calls->is_array()) {
    for (size_t i = 0; i < calls->size(); ++i) {
      const Json& call = (*calls)[i];
      const Json& function = call.at("function");
      call_start(int(i), string_or_empty(call, "id"), string_or_empty(function, "name"), nullptr);
      call_arguments(int(i), string_or_empty(function, "arguments"), nullptr);
    }
  }
  finish_reason_ = string_or_empty(choice, "finish_reason");
  if (completion.contains("usage")) usage_ = completion["usage"];
  end(nullptr);
}

std::string ResponseBuilder::status() const {
  if (!error_.is_null()) return "failed";
  if (!finished_) return "in_progress";
  return finish_reason_ == "length" ? "incomplete" : "completed";
}

Json ResponseBuilder::output() const {
  Json output = Json::array();
  for (const Item& item : items_) output.push_back(item_json(item, !item.done));
  return output;
}

Json ResponseBuilder::response() const {
  const std::string state = status();
  Json usage = nullptr;
  if (finished_ && usage_.is_object()) {
    const int64_t input = usage_.value("prompt_tokens", int64_t(0));
    const int64_t output = usage_.value("completion_tokens", int64_t(0));
    int64_t reasoning = 0;
    for (const Item& item : items_)
      if (item.kind == Kind::kReasoning && count_tokens_) reasoning += count_tokens_(item.text);
    usage = {{"input_tokens", input},
             {"input_tokens_details", {{"cached_tokens", 0}}},
             {"output_tokens", output},
             {"output_tokens_details", {{"reasoning_tokens", std::min(reasoning, output)}}},
             {"total_tokens", input + output}};
  }
  const ResponsesRequest& r = request_;
  Json response = {
      {"id", id_},
      {"object", "response"},
      {"created_at", created_at_},
      {"status", state},
      {"background", false},
      {"error", error_},
      {"incomplete_details", state == "incomplete" ? Json{{"reason", "max_output_tokens"}} : Json(nullptr)},
      {"instructions", r.instructions},
      {"max_output_tokens", r.max_output_tokens ? Json(*r.max_output_tokens) : Json(nullptr)},
      {"max_tool_calls", nullptr},
      {"model", model_},
      {"output", output()},
      {"parallel_tool_calls", r.parallel_tool_calls},
      {"previous_response_id", r.previous_response_id.empty() ? Json(nullptr) : Json(r.previous_response_id)},
      {"reasoning", r.reasoning},
      {"service_tier", "default"},
      {"store", r.store},
      {"temperature", r.temperature},
      {"text", r.text},
      {"tool_choice", r.tool_choice},
      {"tools", r.tools},
      {"top_logprobs", 0},
      {"top_p", r.top_p},
      {"truncation", "disabled"},
      {"usage", usage},
      {"user", nullptr},
      {"metadata", r.metadata},
  };
  if (state == "completed") response["completed_at"] = completed_at_;
  return response;
}

std::string translate_chat_sse(std::string_view chat_sse, ResponseBuilder& builder) {
  std::string out;
  size_t begin = 0;
  while (begin < chat_sse.size()) {
    size_t end = chat_sse.find("\n\n", begin);
    if (end == std::string_view::npos) end = chat_sse.size();
    const std::string_view event = chat_sse.substr(begin, end - begin);
    begin = end + 2;
    if (event.empty()) continue;
    if (event.front() == ':') {
      out += event;
      out += "\n\n";
    } else if (event.substr(0, 6) == "data: ") {
      const std::string_view payload = event.substr(6);
      if (payload == "[DONE]") builder.finish(out);
      else builder.on_chunk(Json::parse(payload), out);
    }
  }
  return out;
}

}  // namespace aerie::server
