// logprobs / top_logprobs over HTTP: one entry per output token whose text makes up the content, the
// streamed entries equal the whole response's, stop strings end the entries where they end the text, and
// a token's log-probability during generation equals the one a fresh request computes for the same prefix.
#include <gtest/gtest.h>

#include <cmath>

#include "server_fixture.h"

namespace aerie::server::testing {
namespace {

Json chat_body(int max_tokens, Json extra = Json::object()) {
  Json body = {{"messages", {{{"role", "user"}, {"content", "tell me about the sea"}}}},
               {"max_tokens", max_tokens},
               {"temperature", 0},
               {"ignore_eos", true},
               {"logprobs", true},
               {"top_logprobs", 3}};
  for (auto& [key, value] : extra.items()) body[key] = value;
  return body;
}

// Entries from two requests: same tokens, log-probabilities equal to float rounding (a repeated prompt
// comes partly from the prefix cache, so its prefill runs over fewer rows).
void expect_same_entries(const Json& a, const Json& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i]["token"], b[i]["token"]) << i;
    EXPECT_EQ(a[i]["bytes"], b[i]["bytes"]) << i;
    EXPECT_NEAR(a[i]["logprob"].get<double>(), b[i]["logprob"].get<double>(), 1e-4) << i;
    ASSERT_EQ(a[i]["top_logprobs"].size(), b[i]["top_logprobs"].size());
    for (size_t k = 0; k < a[i]["top_logprobs"].size(); ++k) {
      EXPECT_EQ(a[i]["top_logprobs"][k]["token"], b[i]["top_logprobs"][k]["token"]) << i;
      EXPECT_NEAR(a[i]["top_logprobs"][k]["logprob"].get<double>(), b[i]["top_logprobs"][k]["logprob"].get<double>(), 1e-4);
    }
  }
}

// The vocabulary id whose text is `text` (the fixture's tokens decode to distinct texts).
int32_t id_of(const Tokenizer& tokenizer, const std::string& text) {
  int32_t found = -1;
  for (int32_t id = 0; id < tokenizer.n_vocab(); ++id) {
    const int32_t ids[1] = {id};
    if (tokenizer.decode(ids) != text) continue;
    EXPECT_EQ(found, -1) << "two ids decode to '" << text << "'";
    found = id;
  }
  return found;
}

// Every chunk's logprobs.content entries, in order.
Json streamed_chat_entries(const SseResult& s) {
  Json entries = Json::array();
  for (const Json& e : s.events)
    for (const Json& c : e["choices"])
      if (!c["logprobs"].is_null())
        for (const Json& entry : c["logprobs"]["content"]) entries.push_back(entry);
  return entries;
}

class ServeLogprobs : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = new TestServer(); }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  static TestServer* server_;
};
TestServer* ServeLogprobs::server_ = nullptr;

TEST_F(ServeLogprobs, ChatEntriesMakeUpTheContentStreamedOrNot) {
  auto client = server_->client();
  const HttpResult r = post(*client, "/v1/chat/completions", chat_body(16).dump());
  ASSERT_EQ(r.status, 200) << r.body;
  const Json choice = r.json()["choices"][0];
  const Json& entries = choice["logprobs"]["content"];
  ASSERT_EQ(entries.size(), 16u);
  std::string joined;
  for (const Json& entry : entries) {
    joined += entry["token"].get<std::string>();
    const double logprob = entry["logprob"];
    EXPECT_LE(logprob, 0.0);
    ASSERT_EQ(entry["top_logprobs"].size(), 3u);
    // Greedy: the sampled token is the most likely one; the alternatives come best first.
    EXPECT_EQ(entry["top_logprobs"][0]["token"], entry["token"]);
    EXPECT_DOUBLE_EQ(entry["top_logprobs"][0]["logprob"].get<double>(), logprob);
    double mass = 0.0;
    for (size_t k = 0; k < 3; ++k) {
      mass += std::exp(entry["top_logprobs"][k]["logprob"].get<double>());
      if (k > 0) {
        EXPECT_LE(entry["top_logprobs"][k]["logprob"].get<double>(), entry["top_logprobs"][k - 1]["logprob"].get<double>());
      }
    }
    EXPECT_LE(mass, 1.0 + 1e-5);
    std::vector<int> bytes;
    for (unsigned char b : entry["token"].get<std::string>()) bytes.push_back(b);
    EXPECT_EQ(entry["bytes"], Json(bytes));
  }
  EXPECT_EQ(joined, choice["message"]["content"]);

  const SseResult s = post_stream(*client, "/v1/chat/completions", chat_body(16, {{"stream", true}}));
  ASSERT_TRUE(s.done);
  expect_same_entries(streamed_chat_entries(s), entries);

  // Without the flag there is no logprobs object.
  const Json plain = post(*client, "/v1/chat/completions", chat_body(4, {{"logprobs", false}, {"top_logprobs", nullptr}}).dump()).json();
  EXPECT_TRUE(plain["choices"][0]["logprobs"].is_null());
}

TEST_F(ServeLogprobs, StopStringsEndTheEntriesWhereTheyEndTheText) {
  auto client = server_->client();
  const Json full = post(*client, "/v1/chat/completions", chat_body(30).dump()).json();
  const std::string text = full["choices"][0]["message"]["content"];
  ASSERT_GE(text.size(), 12u);
  const std::string stop = text.substr(8, 2);
  const HttpResult cut = post(*client, "/v1/chat/completions", chat_body(30, {{"stop", {stop}}}).dump());
  ASSERT_EQ(cut.status, 200) << cut.body;
  const Json c = cut.json();
  const Json& entries = c["choices"][0]["logprobs"]["content"];
  // One entry per counted output token: up to and including the one that completed the stop string.
  EXPECT_EQ(int(entries.size()), c["usage"]["completion_tokens"].get<int>());
  std::string joined;
  for (const Json& entry : entries) joined += entry["token"].get<std::string>();
  EXPECT_EQ(joined.rfind(c["choices"][0]["message"]["content"].get<std::string>(), 0), 0u);
  EXPECT_NE(joined.find(stop), std::string::npos);
  Json prefix = Json::array();
  for (size_t i = 0; i < entries.size(); ++i) prefix.push_back(full["choices"][0]["logprobs"]["content"][i]);
  expect_same_entries(entries, prefix);

  const SseResult s = post_stream(*client, "/v1/chat/completions", chat_body(30, {{"stop", stop}, {"stream", true}}));
  ASSERT_TRUE(s.done);
  expect_same_entries(streamed_chat_entries(s), entries);
}

TEST_F(ServeLogprobs, CompletionsOffsetsAndAFreshRequestAgree) {
  auto client = server_->client();
  const Json body = {{"prompt", "the sea is"}, {"max_tokens", 12}, {"temperature", 0}, {"ignore_eos", true}, {"logprobs", 2}};
  const HttpResult r = post(*client, "/v1/completions", body.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  const Json choice = r.json()["choices"][0];
  const Json& lp = choice["logprobs"];
  ASSERT_EQ(lp["tokens"].size(), 12u);
  ASSERT_EQ(lp["token_logprobs"].size(), 12u);
  ASSERT_EQ(lp["top_logprobs"].size(), 12u);
  std::string joined;
  for (size_t i = 0; i < 12; ++i) {
    EXPECT_EQ(lp["text_offset"][i], int64_t(joined.size()));
    joined += lp["tokens"][i].get<std::string>();
    EXPECT_LE(lp["top_logprobs"][i].size(), 2u);
    EXPECT_TRUE(lp["top_logprobs"][i].contains(lp["tokens"][i].get<std::string>()));
  }
  EXPECT_EQ(joined, choice["text"]);

  // Streamed: the chunks' arrays concatenate to the whole response's, offsets included.
  Json streamed = body;
  streamed["stream"] = true;
  const SseResult s = post_stream(*client, "/v1/completions", streamed);
  ASSERT_TRUE(s.done);
  Json tokens = Json::array(), logprobs = Json::array(), offsets = Json::array();
  for (const Json& e : s.events)
    for (const Json& c : e["choices"])
      if (!c["logprobs"].is_null())
        for (size_t i = 0; i < c["logprobs"]["tokens"].size(); ++i) {
          tokens.push_back(c["logprobs"]["tokens"][i]);
          logprobs.push_back(c["logprobs"]["token_logprobs"][i]);
          offsets.push_back(c["logprobs"]["text_offset"][i]);
        }
  EXPECT_EQ(tokens, lp["tokens"]);
  EXPECT_EQ(offsets, lp["text_offset"]);
  ASSERT_EQ(logprobs.size(), 12u);
  for (size_t i = 0; i < 12; ++i) EXPECT_NEAR(logprobs[i].get<double>(), lp["token_logprobs"][i].get<double>(), 1e-4);

  // The log-probability of generated token i equals what a fresh request (prompt + the first i tokens,
  // as ids) computes for its first token: decode and prefill paths agree.
  const std::vector<int32_t> ids = server_->tokenizer().encode("the sea is", true);
  std::vector<int32_t> generated;
  for (const Json& token : lp["tokens"]) generated.push_back(id_of(server_->tokenizer(), token.get<std::string>()));
  for (size_t i : {size_t(0), size_t(5), size_t(11)}) {
    std::vector<int32_t> prefix = ids;
    prefix.insert(prefix.end(), generated.begin(), generated.begin() + long(i));
    const Json fresh = post(*client, "/v1/completions",
                            Json{{"prompt", prefix}, {"max_tokens", 1}, {"temperature", 0}, {"logprobs", 0}}.dump())
                           .json();
    EXPECT_NEAR(fresh["choices"][0]["logprobs"]["token_logprobs"][0].get<double>(),
                lp["token_logprobs"][i].get<double>(), 2e-3)
        << "token " << i;
  }
}

TEST_F(ServeLogprobs, SampledTokensCarryTheirOwnLogprob) {
  auto client = server_->client();
  const Json body = chat_body(12, {{"temperature", 1.5}, {"seed", 7}, {"n", 2}, {"top_logprobs", 5}});
  const HttpResult r = post(*client, "/v1/chat/completions", body.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  // Named: a range-for over r.json()["choices"] would iterate a temporary already destroyed (C++20).
  const Json response = r.json();
  for (const Json& choice : response["choices"]) {
    const Json& entries = choice["logprobs"]["content"];
    ASSERT_EQ(entries.size(), 12u);
    for (const Json& entry : entries) {
      const double best = entry["top_logprobs"][0]["logprob"];
      EXPECT_LE(entry["logprob"].get<double>(), best + 1e-9);
      // A sampled token among the top 5 shows the same figure there.
      for (const Json& alt : entry["top_logprobs"])
        if (alt["token"] == entry["token"]) {
          EXPECT_DOUBLE_EQ(alt["logprob"].get<double>(), entry["logprob"].get<double>());
        }
    }
  }
}

}  // namespace
}  // namespace aerie::server::testing
