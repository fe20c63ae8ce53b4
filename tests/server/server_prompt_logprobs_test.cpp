// Prompt log-probabilities over HTTP: OpenAI's echo with logprobs on /v1/completions (the echoed prompt's
// tokens first, the first with null figures, text offsets into the echoed text) and vLLM's prompt_logprobs
// on both endpoints ([null, {"<id>": {"logprob", "rank", "decoded_token"}}, ...]: per choice on
// completions, once for the response on chat), whole and streamed (in a choice's first chunk). The figures
// of both shapes agree, and equal the distribution a fresh request sees at that point of the prompt.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>

#include "server_fixture.h"

namespace aerie::server::testing {
namespace {

constexpr const char* kPrompt = "the sea is calm tonight";

// The responses parsed keeping their keys' order (vLLM's maps put the prompt token first).
using Ordered = nlohmann::ordered_json;

// Equal JSON, numbers to 1e-5 (separate requests: the same figures up to float rounding).
template <class A, class B>
void expect_near(const A& a, const B& b, const std::string& where = "") {
  if (a.is_number() && b.is_number()) {
    EXPECT_NEAR(a.template get<double>(), b.template get<double>(), 1e-5) << where;
  } else if (a.is_object() && b.is_object()) {
    EXPECT_EQ(a.size(), b.size()) << where;
    for (auto it = a.begin(); it != a.end(); ++it) {
      ASSERT_TRUE(b.contains(it.key())) << where << "/" << it.key();
      expect_near(it.value(), b[it.key()], where + "/" + it.key());
    }
  } else if (a.is_array() && b.is_array()) {
    ASSERT_EQ(a.size(), b.size()) << where;
    for (size_t i = 0; i < a.size(); ++i) expect_near(a[i], b[i], where + "/" + std::to_string(i));
  } else {
    EXPECT_EQ(a.dump(), b.dump()) << where;
  }
}

Json completion(Json extra) {
  Json body = {{"prompt", kPrompt}, {"max_tokens", 6}, {"temperature", 0}, {"ignore_eos", true}};
  for (auto& [key, value] : extra.items()) body[key] = value;
  return body;
}

class ServePromptLogprobs : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = new TestServer(); }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  static Ordered post_ok(const std::string& path, const Json& body) {
    auto client = server_->client();
    const HttpResult r = post(*client, path, body.dump());
    EXPECT_EQ(r.status, 200) << r.body;
    return r.status == 200 ? Ordered::parse(r.body) : Ordered::object();
  }
  static std::string text_of(int64_t id) {
    const int32_t ids[1] = {int32_t(id)};
    return server_->tokenizer().decode(ids);
  }
  static std::vector<int64_t> prompt_ids() {
    const std::vector<int32_t> ids = server_->tokenizer().encode(kPrompt, true);
    return {ids.begin(), ids.end()};
  }
  static TestServer* server_;
};
TestServer* ServePromptLogprobs::server_ = nullptr;

// vLLM's shape for `ids`, k alternatives: null first; then the prompt token's key first with its rank, the
// k most likely ranked 1..k best first, each decoded alone. Returns the prompt tokens' log-probabilities.
std::vector<double> check_vllm_shape(const Ordered& list, const std::vector<int64_t>& ids, size_t k,
                                     const std::function<std::string(int64_t)>& text_of) {
  std::vector<double> logprobs;
  EXPECT_EQ(list.size(), ids.size());
  if (list.size() != ids.size()) return logprobs;
  EXPECT_TRUE(list[0].is_null());
  for (size_t i = 1; i < ids.size(); ++i) {
    const Ordered& item = list[i];
    const std::string key = std::to_string(ids[i]);
    EXPECT_EQ(item.begin().key(), key) << i;
    const Ordered& own = item[key];
    EXPECT_EQ(own["decoded_token"], text_of(ids[i]));
    const int64_t rank = own["rank"];
    EXPECT_GE(rank, 1);
    EXPECT_LE(own["logprob"].get<double>(), 0.0);
    logprobs.push_back(own["logprob"]);
    EXPECT_EQ(item.size(), rank <= int64_t(k) ? k : k + 1) << i;
    // The alternatives: ranks 1..k in order, best first; the prompt token among them shows the same figures.
    int64_t next_rank = 1;
    double previous = 0.0;
    for (auto it = std::next(item.begin()); it != item.end(); ++it) {
      if (next_rank == rank) ++next_rank;  // its own entry came first
      EXPECT_EQ((*it)["rank"], next_rank) << i;
      EXPECT_EQ((*it)["decoded_token"], text_of(std::stoll(it.key())));
      if (next_rank > 1) {
        EXPECT_LE((*it)["logprob"].get<double>(), previous) << i;
      }
      if (next_rank < rank) {
        EXPECT_GE((*it)["logprob"].get<double>(), own["logprob"].get<double>()) << i;
      }
      previous = (*it)["logprob"];
      ++next_rank;
    }
  }
  return logprobs;
}

TEST_F(ServePromptLogprobs, CompletionsEchoPutsThePromptFirstAndVllmsFieldAgrees) {
  const std::vector<int64_t> ids = prompt_ids();
  const size_t n = ids.size();
  ASSERT_GE(n, 5u);
  const Ordered r = post_ok("/v1/completions", completion({{"echo", true}, {"logprobs", 2}, {"prompt_logprobs", 3}}));
  const Ordered& choice = r["choices"][0];
  const std::string text = choice["text"];
  ASSERT_EQ(text.rfind(kPrompt, 0), 0u) << text;
  const Ordered& lp = choice["logprobs"];
  ASSERT_EQ(lp["tokens"].size(), n + 6);
  // The echoed prompt: its tokens' texts, the first without figures (nothing precedes it).
  for (size_t i = 0; i < n; ++i) EXPECT_EQ(lp["tokens"][i], text_of(ids[i])) << i;
  EXPECT_TRUE(lp["token_logprobs"][0].is_null());
  EXPECT_TRUE(lp["top_logprobs"][0].is_null());
  for (size_t i = 1; i < n + 6; ++i) {
    EXPECT_LE(lp["token_logprobs"][i].get<double>(), 0.0) << i;
    EXPECT_EQ(lp["top_logprobs"][i].size(), 2u) << i;
  }
  // Offsets into the echoed text: each prompt token's text is there (the special <|begin_of_text|> is not
  // in the echo and starts where the next token does); the generated tokens follow the echo.
  EXPECT_EQ(lp["text_offset"][0], 0);
  for (size_t i = 1; i < n; ++i) {
    const std::string token = lp["tokens"][i];
    EXPECT_EQ(text.compare(lp["text_offset"][i].get<size_t>(), token.size(), token), 0) << i << " '" << token << "'";
  }
  std::string generated;
  for (size_t i = n; i < n + 6; ++i) {
    EXPECT_EQ(lp["text_offset"][i], int64_t(std::strlen(kPrompt) + generated.size())) << i;
    generated += lp["tokens"][i].get<std::string>();
  }
  EXPECT_EQ(std::strlen(kPrompt) + generated.size(), text.size());

  // vLLM's prompt_logprobs on the same choice: its figures are the echo's.
  const std::vector<double> own = check_vllm_shape(choice["prompt_logprobs"], ids, 3, text_of);
  ASSERT_EQ(own.size(), n - 1);
  for (size_t i = 1; i < n; ++i) EXPECT_DOUBLE_EQ(own[i - 1], lp["token_logprobs"][i].get<double>()) << i;

  // Asking for them changes nothing else: the same text as without.
  const Ordered plain = post_ok("/v1/completions", completion({{"echo", true}}));
  EXPECT_EQ(plain["choices"][0]["text"], text);
  EXPECT_FALSE(plain["choices"][0].contains("prompt_logprobs"));

  // Each prompt token's distribution is what a fresh request sees there: the echo's alternatives at token i
  // are a request on ids[0..i)'s alternatives for its first generated token.
  for (size_t i : {size_t(1), n / 2, n - 1}) {
    const std::vector<int64_t> prefix(ids.begin(), ids.begin() + long(i));
    const Ordered fresh = post_ok("/v1/completions", Json{{"prompt", prefix}, {"max_tokens", 1}, {"temperature", 0}, {"logprobs", 2}});
    const Ordered& top = fresh["choices"][0]["logprobs"]["top_logprobs"][0];
    ASSERT_EQ(top.size(), 2u);
    for (auto it = top.begin(); it != top.end(); ++it) {
      ASSERT_TRUE(lp["top_logprobs"][i].contains(it.key())) << i << " " << it.key();
      EXPECT_NEAR(lp["top_logprobs"][i][it.key()].get<double>(), it.value().get<double>(), 2e-3) << i;
    }
  }
}

TEST_F(ServePromptLogprobs, EchoOnlyScoringAndTokenPrompts) {
  const std::vector<int64_t> ids = prompt_ids();
  // max_tokens 0: the prompt's figures and nothing generated.
  const Ordered r = post_ok("/v1/completions", completion({{"echo", true}, {"logprobs", 1}, {"max_tokens", 0}}));
  const Ordered& choice = r["choices"][0];
  EXPECT_EQ(choice["text"], kPrompt);
  EXPECT_EQ(choice["finish_reason"], "length");
  EXPECT_EQ(r["usage"]["completion_tokens"], 0);
  ASSERT_EQ(choice["logprobs"]["tokens"].size(), ids.size());
  EXPECT_FALSE(choice.contains("prompt_logprobs"));  // only when asked for by name
  // The same prompt as token ids: its echo is the ids decoded (special tokens kept), so every offset is the
  // running length of the tokens' texts; the figures are the text prompt's.
  const Ordered t = post_ok("/v1/completions", Json{{"prompt", ids}, {"max_tokens", 0}, {"echo", true}, {"logprobs", 1}});
  const Ordered& lp = t["choices"][0]["logprobs"];
  std::string joined;
  for (size_t i = 0; i < ids.size(); ++i) {
    EXPECT_EQ(lp["text_offset"][i], int64_t(joined.size())) << i;
    joined += lp["tokens"][i].get<std::string>();
    if (i > 0) {
      EXPECT_NEAR(lp["token_logprobs"][i].get<double>(), choice["logprobs"]["token_logprobs"][i].get<double>(), 1e-5);
    }
  }
  EXPECT_EQ(joined, t["choices"][0]["text"]);
}

TEST_F(ServePromptLogprobs, ChatReportsThePromptOnceAndEqualsTheCompletionsEcho) {
  const Json chat = {{"messages", {{{"role", "user"}, {"content", "tell me about the sea"}}}},
                     {"max_tokens", 5}, {"temperature", 0}, {"ignore_eos", true}, {"n", 2}, {"prompt_logprobs", 2}};
  const Ordered r = post_ok("/v1/chat/completions", chat);
  const Ordered tokenized = post_ok("/tokenize", Json{{"messages", chat["messages"]}});
  const std::vector<int64_t> ids = tokenized["tokens"];
  const std::vector<double> own = check_vllm_shape(r["prompt_logprobs"], ids, 2, text_of);
  for (const Ordered& choice : r["choices"]) EXPECT_FALSE(choice.contains("prompt_logprobs"));
  // The rendered prompt's ids through completions with echo: the same figures.
  const Ordered echo = post_ok("/v1/completions", Json{{"prompt", ids}, {"max_tokens", 0}, {"echo", true}, {"logprobs", 0}});
  const Ordered& lp = echo["choices"][0]["logprobs"];
  ASSERT_EQ(own.size() + 1, lp["token_logprobs"].size());
  for (size_t i = 0; i < own.size(); ++i) EXPECT_NEAR(own[i], lp["token_logprobs"][i + 1].get<double>(), 1e-5) << i;
}

// Streamed: a choice's first chunk carries prompt_logprobs (chat: the role chunk, on the chunk; completions:
// the echo, on the choice) and equals the whole response's; the rest streams as before.
TEST_F(ServePromptLogprobs, StreamedInTheFirstChunkOfEachChoice) {
  auto client = server_->client();
  const Json body = completion({{"echo", true}, {"logprobs", 2}, {"prompt_logprobs", 1}});
  const Ordered whole = post_ok("/v1/completions", body);
  Json streamed = body;
  streamed["stream"] = true;
  const SseResult s = post_stream(*client, "/v1/completions", streamed);
  ASSERT_TRUE(s.done);
  ASSERT_FALSE(s.events.empty());
  const Json& first = s.events[0]["choices"][0];
  EXPECT_EQ(first["text"], kPrompt);
  expect_near(first["prompt_logprobs"], whole["choices"][0]["prompt_logprobs"], "completions");
  Json tokens = Json::array(), offsets = Json::array(), figures = Json::array();
  for (size_t e = 0; e < s.events.size(); ++e) {
    const Json& c = s.events[e]["choices"][0];
    if (e > 0) {
      EXPECT_FALSE(c.contains("prompt_logprobs")) << e;
    }
    if (c["logprobs"].is_null()) continue;
    for (size_t i = 0; i < c["logprobs"]["tokens"].size(); ++i) {
      tokens.push_back(c["logprobs"]["tokens"][i]);
      offsets.push_back(c["logprobs"]["text_offset"][i]);
      figures.push_back(c["logprobs"]["token_logprobs"][i]);
    }
  }
  const Ordered& lp = whole["choices"][0]["logprobs"];
  EXPECT_EQ(tokens.dump(), lp["tokens"].dump());
  EXPECT_EQ(offsets.dump(), lp["text_offset"].dump());
  expect_near(figures, lp["token_logprobs"], "token_logprobs");
  EXPECT_EQ(stream_text(s), whole["choices"][0]["text"]);

  const Json chat = {{"messages", {{{"role", "user"}, {"content", "hello"}}}}, {"max_tokens", 4},
                     {"temperature", 0}, {"ignore_eos", true}, {"prompt_logprobs", 2}};
  const Ordered chat_whole = post_ok("/v1/chat/completions", chat);
  Json chat_streamed = chat;
  chat_streamed["stream"] = true;
  const SseResult cs = post_stream(*client, "/v1/chat/completions", chat_streamed);
  ASSERT_TRUE(cs.done);
  ASSERT_FALSE(cs.events.empty());
  EXPECT_EQ(cs.events[0]["choices"][0]["delta"]["role"], "assistant");
  expect_near(cs.events[0]["prompt_logprobs"], chat_whole["prompt_logprobs"], "chat");
  for (size_t e = 1; e < cs.events.size(); ++e) EXPECT_FALSE(cs.events[e].contains("prompt_logprobs")) << e;
  EXPECT_EQ(stream_text(cs), chat_whole["choices"][0]["message"]["content"]);
}

}  // namespace
}  // namespace aerie::server::testing
