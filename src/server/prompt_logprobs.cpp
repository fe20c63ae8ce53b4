#include "server/prompt_logprobs.h"

#include <algorithm>
#include <string>

#include "server/choice_stream.h"

namespace aerie::server {
namespace {

std::string decoded(const Tokenizer& tokenizer, int64_t id) {
  const int32_t ids[1] = {int32_t(id)};
  return tokenizer.decode(ids);
}

}  // namespace

OrderedJson vllm_prompt_logprobs_json(const Tokenizer& tokenizer, std::span<const PromptTokenLogprob> entries,
                                      int64_t k) {
  OrderedJson out = OrderedJson::array({nullptr});
  for (const PromptTokenLogprob& entry : entries) {
    OrderedJson item = OrderedJson::object();
    auto add = [&](int64_t id, double logprob, int64_t rank) {
      item[std::to_string(id)] = {{"logprob", logprob}, {"rank", rank}, {"decoded_token", decoded(tokenizer, id)}};
    };
    add(entry.token, entry.logprobs.logprob, entry.rank);
    const auto& top = entry.logprobs.top;
    for (size_t i = 0; i < std::min(top.size(), size_t(k)); ++i) add(top[i].first, top[i].second, int64_t(i) + 1);
    out.push_back(std::move(item));
  }
  return out;
}

std::vector<TokenLogprob> echo_logprob_entries(const Tokenizer& tokenizer, std::span<const int64_t> prompt,
                                               bool skip_special_tokens, std::span<const PromptTokenLogprob> entries,
                                               int64_t k, int64_t echo_bytes) {
  std::vector<TokenLogprob> out;
  IncrementalDecoder decoder(tokenizer, skip_special_tokens);
  std::string text;  // the prompt decoded so far
  for (size_t i = 0; i < prompt.size(); ++i) {
    TokenLogprob entry;
    if (i == 0) {  // no context: its text only
      entry.token = decoded(tokenizer, prompt[0]);
      entry.has_logprob = false;
    } else {
      entry = token_logprob_entry(tokenizer, prompt[i], entries[i - 1].logprobs, k);
    }
    entry.text_offset = std::min(int64_t(text.size()), echo_bytes);
    decoder.push(int32_t(prompt[i]), text);
    out.push_back(std::move(entry));
  }
  return out;
}

}  // namespace aerie::server
