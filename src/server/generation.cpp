#include "server/generation.h"

#include <algorithm>
#include <cstdio>

#include "server/forced_tool_calls.h"
#include "server/prompt_logprobs.h"
#include "server/request_id.h"

namespace aerie::server {
namespace {

using Clock = std::chrono::steady_clock;

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

}  // namespace

Generation::Generation(std::shared_ptr<Backend> backend, GenerationPlan plan, LogFunction log)
    : backend_(std::move(backend)), plan_(std::move(plan)), log_(std::move(log)),
      queue_(std::make_shared<EventQueue>()), start_(Clock::now()) {
  ++backend_->active_generations;
  const int64_t n_choices = int64_t(plan_.prompts.size()) * plan_.n;
  choices_.resize(size_t(n_choices));
  for (int64_t i = 0; i < n_choices; ++i) {
    Choice& choice = choices_[size_t(i)];
    choice.index = int(i);
    choice.prompt = size_t(i / plan_.n);
    std::unique_ptr<ToolCallParser> parser;
    const uint64_t call_ids = plan_.tool_call_id_seed + uint64_t(i);
    if (plan_.forced_tools == ForcedTools::kNamed) parser = make_named_call_parser(plan_.forced_function, call_ids);
    else if (plan_.forced_tools == ForcedTools::kList) parser = make_call_list_parser(call_ids);
    else if (plan_.tool_parser) parser = make_tool_parser(*plan_.tool_parser, call_ids);
    std::optional<ReasoningSplitter> reasoning;
    if (plan_.chat && plan_.reasoning) reasoning.emplace(plan_.starts_in_reasoning);
    choice.stream = std::make_unique<ChoiceStream>(*backend_->model.tokenizer, plan_.stop, backend_->model.eos_ids,
                                                   std::move(parser), std::move(reasoning));
    if (!wants_prompt_logprobs()) choice.stream->prefix(plan_.prompts[choice.prompt].echo, choice.events);
    choice.text_offset = int64_t(plan_.prompts[choice.prompt].echo.size());
  }
  last_write_ = start_;
}

Generation::~Generation() {
  for (Choice& choice : choices_)
    if (submitted_ && !choice.finished) backend_->loop->cancel(choice.engine_id);
  if (submitted_) {
    std::string outcome = client_gone_ ? "client disconnected" : "ok";
    if (!done_ && !client_gone_) outcome = "aborted";
    if (auto error = failure()) outcome = std::string("error: ") + error->what();
    write_log(outcome);
  }
  --backend_->active_generations;
}

void Generation::start() {
  std::vector<SubmitJob> jobs;
  for (Choice& choice : choices_) {
    SubmitJob job;
    job.prompt = plan_.prompts[choice.prompt].ids;
    job.options = plan_.options;
    job.options.sampling.seed = plan_.seeds[size_t(choice.index)];
    job.options.label = RequestLabel::from(plan_.request_id);  // the exemplars of its latencies (/metrics)
    job.choice = choice.index;
    jobs.push_back(std::move(job));
  }
  const std::vector<uint64_t> ids = submit_choices(*backend_->loop, std::move(jobs), queue_);
  for (size_t i = 0; i < ids.size(); ++i) choices_[i].engine_id = ids[i];
  submitted_ = true;
}

bool Generation::all_finished() const {
  for (const Choice& choice : choices_)
    if (!choice.finished) return false;
  return true;
}

bool Generation::all_reported() const {
  for (const Choice& choice : choices_)
    if (!choice.reported) return false;
  return true;
}

Usage Generation::usage() const {
  Usage usage;
  for (const GenerationPrompt& prompt : plan_.prompts) usage.prompt_tokens += int64_t(prompt.ids.size());
  for (const Choice& choice : choices_) usage.completion_tokens += choice.stream->completion_tokens();
  if (plan_.include_speculation) {
    usage.has_speculation = true;
    for (const Choice& choice : choices_) usage.speculation.add(choice.spec);
    usage.synthetic_acceptance = backend_->model.synthetic_acceptance;
  }
  return usage;
}

std::optional<ApiError> Generation::failure() const {
  for (const Choice& choice : choices_) {
    if (choice.error.empty()) continue;
    if (choice.engine_reason == aerie::FinishReason::kError) return ApiError::internal(choice.error);
    return ApiError(503, choice.error, "server_error", "", "request_cancelled");
  }
  return std::nullopt;
}

void Generation::on_event(ChoiceEvent& event, std::string* sse) {
  Choice& choice = choices_[size_t(event.choice)];
  if (event.finished) {
    choice.finished = true;
    choice.engine_reason = event.finish_reason;
  }
  choice.acceptance_length = event.mean_acceptance_length;
  if (event.finished) choice.spec = std::move(event.spec);
  if (!event.tokens.empty() && !have_first_token_) {
    have_first_token_ = true;
    first_token_ = Clock::now();
  }
  if (choice.reported) return;
  if (wants_prompt_logprobs() && !choice.opened) {
    choice.prompt_entries.insert(choice.prompt_entries.end(), event.prompt_logprobs.begin(), event.prompt_logprobs.end());
    if (choice.prompt_entries.size() + 1 >= plan_.prompts[choice.prompt].ids.size()) open_with_prompt_logprobs(choice, sse);
  }
  std::vector<ToolEvent> events;
  const bool stopped = choice.stream->push(event.tokens, events, event.logprobs);
  if (stopped && !event.finished && !choice.stop_cancelled && submitted_) {
    backend_->loop->cancel(choice.engine_id);
    choice.stop_cancelled = true;
  }
  std::optional<FinishReason> finish;
  if (stopped || event.finished) {
    if (!stopped && event.finish_reason == aerie::FinishReason::kError) {
      choice.error = event.error.empty() ? "the engine failed the request" : event.error;
    } else if (!stopped && event.finish_reason == aerie::FinishReason::kCancelled) {
      choice.error = "The request was cancelled by the server (shutting down).";
    }
    choice.stream->finish(events);
    choice.reason = choice.stream->finish_reason(event.finished ? event.finish_reason : aerie::FinishReason::kStop);
    if (const auto stop = choice.stream->stop_string_index()) choice.stop_string = plan_.stop.at(*stop);
    // OpenAI: a call forced by naming the function finishes with "stop", not "tool_calls" (or "length" when
    // max_tokens cut its arguments short).
    if (plan_.forced_tools == ForcedTools::kNamed && choice.reason == FinishReason::kToolCalls) {
      const bool cut = event.finished && event.finish_reason == aerie::FinishReason::kLength;
      choice.reason = cut ? FinishReason::kLength : FinishReason::kStop;
    }
    choice.reported = true;
    finish = choice.reason;
  }
  if (!choice.error.empty()) return;  // the stream ends with an error object instead
  append_events(choice, events, finish, sse);
}

void Generation::append_events(Choice& choice, std::vector<ToolEvent>& events, std::optional<FinishReason> finish,
                               std::string* sse) {
  if (sse == nullptr) {
    for (ToolEvent& event : events) choice.events.push_back(std::move(event));
    for (TokenLogprob& entry : choice.stream->take_logprobs()) choice.logprobs.push_back(std::move(entry));
    return;
  }
  // Streamed log-probabilities travel with the first chunk that releases text after their tokens (text held
  // back by the decoder, a possible stop string or the tool parser holds them back too); the rest with the
  // finish chunk.
  auto release_logprobs = [&] { return logprobs_json(choice, choice.stream->take_logprobs()); };
  const bool usage_field = plan_.include_usage;
  if (!plan_.chat) {
    const std::string text = content_of(events);
    if (!text.empty()) {
      const OrderedJson logprobs = release_logprobs();
      *sse += sse_data(text_completion_chunk_json(plan_.id, plan_.created, plan_.model, choice.index, text,
                                                  std::nullopt, logprobs, usage_field));
    }
    if (finish)
      *sse += sse_data(text_completion_chunk_json(plan_.id, plan_.created, plan_.model, choice.index, "", finish,
                                                  release_logprobs(), usage_field));
    return;
  }
  // Chat: consecutive content (or reasoning) fragments make one chunk; tool-call deltas go in their own.
  ChatDelta pending;
  auto flush = [&] {
    if (!pending.content && !pending.reasoning_content && pending.tool_calls.empty()) return;
    *sse += sse_data(chat_chunk_json(plan_.id, plan_.created, plan_.model, choice.index, pending, std::nullopt,
                                     release_logprobs(), usage_field));
    pending = ChatDelta{};
  };
  for (ToolEvent& event : events) {
    if (event.is_reasoning()) {
      if (pending.content || !pending.tool_calls.empty()) flush();
      if (!pending.reasoning_content) pending.reasoning_content = std::string();
      *pending.reasoning_content += event.content;
    } else if (event.is_content()) {
      if (pending.reasoning_content || !pending.tool_calls.empty()) flush();
      if (!pending.content) pending.content = std::string();
      *pending.content += event.content;
    } else {
      if (pending.content || pending.reasoning_content) flush();
      pending.tool_calls.push_back(std::move(event));
    }
  }
  flush();
  if (finish) {
    OrderedJson chunk = chat_chunk_json(plan_.id, plan_.created, plan_.model, choice.index, ChatDelta{}, finish,
                                        release_logprobs(), usage_field);
    if (choice.stop_string) chunk["choices"][0]["stop_reason"] = *choice.stop_string;
    *sse += sse_data(chunk);
  }
}

void Generation::open_with_prompt_logprobs(Choice& choice, std::string* sse) {
  choice.opened = true;
  const GenerationPrompt& prompt = plan_.prompts[choice.prompt];
  std::vector<TokenLogprob> echo_entries;
  if (plan_.echo_logprobs >= 0)
    echo_entries = echo_logprob_entries(*backend_->model.tokenizer, prompt.ids, prompt.echo_is_text, choice.prompt_entries,
                                        plan_.echo_logprobs, int64_t(prompt.echo.size()));
  if (sse == nullptr) {  // ahead of every generated token's text and entry
    choice.stream->prefix(prompt.echo, choice.events);
    for (TokenLogprob& entry : echo_entries) choice.logprobs.push_back(std::move(entry));
    return;
  }
  if (plan_.chat) {
    ChatDelta role;
    role.role = true;
    OrderedJson chunk = chat_chunk_json(plan_.id, plan_.created, plan_.model, choice.index, role, std::nullopt, nullptr,
                                        plan_.include_usage);
    chunk["prompt_logprobs"] = prompt_logprobs_json(choice);
    *sse += sse_data(chunk);
    return;
  }
  // The echo's entries carry their own offsets: choice.text_offset already starts after the echo.
  const OrderedJson logprobs = echo_entries.empty() ? OrderedJson(nullptr) : completion_logprobs_json(echo_entries, 0);
  OrderedJson chunk = text_completion_chunk_json(plan_.id, plan_.created, plan_.model, choice.index, prompt.echo,
                                                 std::nullopt, logprobs, plan_.include_usage);
  if (plan_.prompt_logprobs >= 0) chunk["choices"][0]["prompt_logprobs"] = prompt_logprobs_json(choice);
  *sse += sse_data(chunk);
}

OrderedJson Generation::prompt_logprobs_json(const Choice& choice) const {
  if (plan_.prompt_logprobs < 0) return nullptr;
  return vllm_prompt_logprobs_json(*backend_->model.tokenizer, choice.prompt_entries, plan_.prompt_logprobs);
}

OrderedJson Generation::logprobs_json(Choice& choice, const std::vector<TokenLogprob>& entries) const {
  if (!wants_logprobs()) return nullptr;
  if (plan_.chat) return chat_logprobs_json(entries);
  // text_offset: where each token's text starts in the choice's text, as in the whole response.
  OrderedJson json = completion_logprobs_json(entries, choice.text_offset);
  for (const TokenLogprob& entry : entries) choice.text_offset += int64_t(entry.token.size());
  return json;
}

std::optional<OrderedJson> Generation::run_to_completion(const std::function<bool()>& client_gone) {
  std::vector<ChoiceEvent> events;
  while (!all_reported()) {
    events.clear();
    queue_->wait_pop(events, std::chrono::milliseconds(100));
    for (ChoiceEvent& event : events) on_event(event, nullptr);
    if (failure()) break;
    if (client_gone && !all_reported() && client_gone()) {
      client_gone_ = true;
      return std::nullopt;
    }
  }
  done_ = true;
  if (auto error = failure()) throw *error;
  if (plan_.chat) {
    std::vector<ChatChoice> out;
    for (const Choice& choice : choices_) {
      ParsedMessage message = collect_events(choice.events);
      ChatChoice c;
      c.index = choice.index;
      c.content = std::move(message.content);
      c.tool_calls = std::move(message.tool_calls);
      if (plan_.reasoning) c.reasoning_content = std::move(message.reasoning_content);
      c.finish_reason = choice.reason;
      if (wants_logprobs()) c.logprobs = chat_logprobs_json(choice.logprobs);
      out.push_back(std::move(c));
    }
    // vLLM writes one prompt_logprobs for the prompt the choices share.
    OrderedJson body = chat_completion_json(plan_.id, plan_.created, plan_.model, out, usage(),
                                            prompt_logprobs_json(choices_[0]));
    // vLLM's stop_reason: the stop string that ended a choice (written only then).
    for (const Choice& choice : choices_)
      if (choice.stop_string) body["choices"][size_t(choice.index)]["stop_reason"] = *choice.stop_string;
    // Relaxed thinking acceptance is lossy: every chat response of such a server says so.
    if (const auto& relaxed = backend_->model.relaxed_thinking)
      body["relaxed_thinking_acceptance"] = {{"top_k", relaxed->top_k}, {"delta", relaxed->delta}};
    return body;
  }
  std::vector<CompletionChoice> out;
  for (const Choice& choice : choices_) {
    CompletionChoice c;
    c.index = choice.index;
    c.text = content_of(choice.events);
    c.finish_reason = choice.reason;
    if (wants_logprobs())
      c.logprobs = completion_logprobs_json(choice.logprobs, int64_t(plan_.prompts[choice.prompt].echo.size()));
    c.prompt_logprobs = prompt_logprobs_json(choice);
    out.push_back(std::move(c));
  }
  return text_completion_json(plan_.id, plan_.created, plan_.model, out, usage());
}

Generation::Pump Generation::pump(const std::function<bool(std::string_view)>& write) {
  if (done_) return Pump::kDone;
  std::string sse;
  if (!opened_) {
    opened_ = true;
    for (Choice& choice : choices_) {
      if (wants_prompt_logprobs()) continue;  // its first chunk waits for them (open_with_prompt_logprobs)
      if (plan_.chat) {
        ChatDelta role;
        role.role = true;
        sse += sse_data(chat_chunk_json(plan_.id, plan_.created, plan_.model, choice.index, role, std::nullopt,
                                        nullptr, plan_.include_usage));
      }
      if (!choice.events.empty()) {  // the echoed prompt
        std::vector<ToolEvent> echo = std::move(choice.events);
        choice.events.clear();
        append_events(choice, echo, std::nullopt, &sse);
      }
    }
  } else {
    std::vector<ChoiceEvent> events;
    queue_->wait_pop(events, std::chrono::milliseconds(200));
    for (ChoiceEvent& event : events) on_event(event, &sse);
  }
  if (auto error = failure()) {
    sse += sse_data(error->body());
    sse += kSseDone;
    done_ = true;
  } else if (all_reported()) {
    if (plan_.include_usage) {
      sse += sse_data(plan_.chat ? chat_usage_chunk_json(plan_.id, plan_.created, plan_.model, usage())
                                 : text_completion_usage_chunk_json(plan_.id, plan_.created, plan_.model, usage()));
    }
    sse += kSseDone;
    done_ = true;
  }
  const auto now = Clock::now();
  // An SSE comment after a silence: writing is how a vanished client shows (the second write fails).
  if (sse.empty() && now - last_write_ > std::chrono::seconds(2)) sse = ": keep-alive\n\n";
  if (!sse.empty()) {
    if (!write(sse)) {
      client_gone_ = true;
      done_ = false;
      return Pump::kClientGone;
    }
    last_write_ = now;
  }
  return done_ ? Pump::kDone : Pump::kMore;
}

void Generation::write_log(std::string_view outcome) {
  if (!log_) return;
  const auto now = Clock::now();
  const Usage u = usage();
  // Mean acceptance length over the choices that speculated ("-" when none did).
  double acceptance = 0.0;
  int speculated = 0;
  for (const Choice& choice : choices_)
    if (choice.acceptance_length > 0.0) {
      acceptance += choice.acceptance_length;
      ++speculated;
    }
  char acceptance_text[32] = "-";
  if (speculated > 0) std::snprintf(acceptance_text, sizeof(acceptance_text), "%.2f", acceptance / speculated);
  char ttft[32] = "-";
  if (have_first_token_) std::snprintf(ttft, sizeof(ttft), "%.1f ms", ms_between(start_, first_token_));
  char line[768];
  std::snprintf(line, sizeof(line),
                "%s (request %.*s): %s, %zu choice%s, prompt %lld tokens, generated %lld tokens, ttft %s, "
                "total %.1f ms, acceptance length %s, %.*s",
                plan_.id.c_str(), int(std::min<size_t>(plan_.request_id.size(), kMaxRequestIdBytes)),
                plan_.request_id.data(), plan_.stream ? "stream" : "whole", choices_.size(), choices_.size() == 1 ? "" : "s",
                (long long)u.prompt_tokens, (long long)u.completion_tokens, ttft, ms_between(start_, now), acceptance_text,
                int(outcome.size()), outcome.data());
  log_(line);
}

}  // namespace aerie::server
