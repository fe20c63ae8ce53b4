// Structured output's two costs over a corpus of real-world-shaped schemas (bench/grammar/schema_corpus.json:
// API objects, tool calls, Kubernetes objects, package.json, nested and recursive $defs), issue 41 item 6:
// - compile time: each schema compiled `repeats` times; per schema the median, then p50 / p95 / max across
//   the corpus;
// - per-token mask time with the Llama 3.1 (128k) and DeepSeek-V3 (129k) vocabularies, at 1 and 2 threads
//   (each thread masks its own walks, as concurrent requests do): seeded random walks through the mask,
//   uniform among the allowed tokens (after 30 tokens among those that close a string, an object or an
//   array, or end a literal, so walks end; at most 200 tokens),
//   every allowed_tokens call timed; p50 / p95 / max over all of them, and (at 1 thread) the slowest
//   masks' schemas and outputs so far, and the masks' percentiles by the kind of state they were taken in
//   (the top frame's: a string, a string with a pattern or format, a number, ...).
//   schema_bench [--repeats N] [--walks N] [--corpus FILE] [--tokenizers DIR] [--clock wall|cpu]
// --clock cpu times each mask by the calling thread's CPU time (CLOCK_THREAD_CPUTIME_ID) instead of the wall
// clock: on a shared, loaded host the wall clock also counts the time the thread waited for a core, which
// makes the tail of a 10-50 us mask mostly noise; CPU time keeps the work (cache misses included).
// bench/grammar/schema_corpus_patterns.json (--corpus) holds schemas full of pattern and format strings.
// Last, per vocabulary, what a constrained sequence costs the engine per step beside its masks
// (sample/constraint_mask.h): masking K + 1 verification rows (a copy of the rows, the masks applied, the
// state walked along the drafts) and K draft rows, with a stand-in constraint whose mask is a fixed copy,
// so that only the engine-side work is timed (K = 0 is a plain step).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <thread>

#include <time.h>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "grammar/json_constraint.h"
#include "grammar/json_schema.h"
#include "grammar/token_trie.h"
#include "sample/constraint_mask.h"
#include "sample/sampling.h"
#include "tokenizer/tokenizer.h"

namespace {

using Clock = std::chrono::steady_clock;
using Json = nlohmann::ordered_json;

double microseconds_since(Clock::time_point start) {
  return std::chrono::duration<double, std::micro>(Clock::now() - start).count();
}

bool g_cpu_clock = false;  // --clock cpu

double thread_cpu_us() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) * 1e6 + double(t.tv_nsec) * 1e-3;
}

// Now, in microseconds, by the chosen clock (masks only; compile times are always wall time).
double mask_clock_us() {
  if (!g_cpu_clock) return std::chrono::duration<double, std::micro>(Clock::now().time_since_epoch()).count();
  return thread_cpu_us();
}

struct Percentiles {
  double p50 = 0, p95 = 0, max = 0;
};

Percentiles percentiles(std::vector<double> v) {
  if (v.empty()) return {};
  std::sort(v.begin(), v.end());
  auto at = [&](double q) { return v[std::min(v.size() - 1, size_t(q * double(v.size() - 1) + 0.5))]; };
  return {at(0.5), at(0.95), v.back()};
}

struct Vocabulary {
  std::shared_ptr<const aerie::TokenTrie> trie;
  int32_t end_token = -1;
  std::vector<uint8_t> closing;  // [n_vocab] starts with a closing quote or bracket, or ends a literal
};

// As the server builds it: end-of-turn / end-of-text ids end the output, other special and added tokens never.
Vocabulary load_vocabulary(const std::string& dir) {
  const aerie::Tokenizer tokenizer = aerie::Tokenizer::load(dir);
  std::vector<std::string> bytes;
  std::vector<int32_t> end, never;
  for (int32_t id = 0; id < tokenizer.n_vocab(); ++id) {
    bytes.emplace_back(tokenizer.token_bytes(id));
    const std::string_view name = tokenizer.id_to_token(id);
    if (name == "<|eot_id|>" || name == "<|end_of_text|>" || name == "<|eom_id|>" || name == "<｜end▁of▁sentence｜>")
      end.push_back(id);
    else if (tokenizer.is_special(id) || tokenizer.is_added(id)) never.push_back(id);
  }
  AERIE_CHECK(!end.empty(), "schema_bench: no end token in ", dir);
  Vocabulary v{std::make_shared<const aerie::TokenTrie>(bytes, end, never), end[0], {}};
  for (const std::string& b : bytes)
    v.closing.push_back(!b.empty() && (b[0] == '"' || b[0] == ']' || b[0] == '}' || b == "e" || b == "ue" ||
                                       b == "rue" || b == "se" || b == "lse" || b == "l" || b == "ll" || b == "ull"));
  return v;
}

// A slow mask: where it was, so that a slow state can be reproduced.
struct Slowest {
  double us = 0;
  std::string schema, output;  // the output so far (its last 60 bytes)
};
constexpr size_t kSlowestShown = 8;

// Keeps the kSlowestShown slowest masks, slowest first.
void note_slow(std::vector<Slowest>& slowest, Slowest s) {
  if (slowest.size() == kSlowestShown && s.us <= slowest.back().us) return;
  slowest.push_back(std::move(s));
  std::sort(slowest.begin(), slowest.end(), [](const Slowest& a, const Slowest& b) { return a.us > b.us; });
  if (slowest.size() > kSlowestShown) slowest.pop_back();
}

// What the state before a mask is, by its top frame: where slow masks come from.
enum StateKind { kDocument, kString, kPatternString, kNumber, kLiteral, kObject, kArray, kSeveralStacks, kKinds };
const char* const kKindNames[kKinds] = {"document", "string", "pattern string", "number", "literal or key",
                                        "object",   "array",  "several stacks"};

StateKind state_kind(const aerie::JsonMatcher& m) {
  const aerie::JsonFrame* top = m.single_top();
  if (top == nullptr) return kSeveralStacks;
  if (top->node == aerie::kJsonNoNode) return kDocument;
  const aerie::JsonNode& n = m.grammar()->nodes[top->node];
  switch (n.kind) {
    case aerie::JsonNodeKind::kString: return n.pattern == aerie::kJsonNoNode ? kString : kPatternString;
    case aerie::JsonNodeKind::kNumber: return kNumber;
    case aerie::JsonNodeKind::kLiteral: return kLiteral;
    case aerie::JsonNodeKind::kObject: return kObject;
    case aerie::JsonNodeKind::kArray: return kArray;
    case aerie::JsonNodeKind::kAnyOf: break;
  }
  return kSeveralStacks;
}

// One seeded walk (see the top comment); appends the microseconds of every mask to `times`, and to
// by_kind[kind of the state].
void timed_walk(const std::string& name, const std::shared_ptr<const aerie::JsonGrammar>& grammar, const Vocabulary& v,
                uint64_t seed, std::vector<double>& times, std::vector<Slowest>& slowest,
                std::vector<std::vector<double>>& by_kind) {
  aerie::JsonConstraint constraint(grammar, v.trie);
  aerie::Rng rng(seed);
  std::vector<uint8_t> allowed;
  std::vector<int32_t> text, closing;
  std::string output;
  for (int n = 0; n < 200 && !constraint.finished(); ++n) {
    const double start = mask_clock_us();
    constraint.allowed_tokens(allowed);
    times.push_back(mask_clock_us() - start);
    by_kind[state_kind(constraint.matcher())].push_back(times.back());
    note_slow(slowest, {times.back(), name, output.substr(output.size() > 60 ? output.size() - 60 : 0)});
    text.clear();
    closing.clear();
    for (size_t t = 0; t < allowed.size(); ++t) {
      if (!allowed[t] || v.trie->is_end(int32_t(t))) continue;
      text.push_back(int32_t(t));
      if (v.closing[t]) closing.push_back(int32_t(t));
    }
    if (allowed[size_t(v.end_token)] && (text.empty() || rng.next_unit_float() < 0.3f)) return;
    if (text.empty()) return;
    const auto& pool = n >= 30 && !closing.empty() ? closing : text;
    const int32_t token = pool[rng.next_u64() % pool.size()];
    if (!constraint.accept(token)) return;
    output += v.trie->token_bytes(token);
  }
}

// A constraint whose mask is a fixed vector and that takes any token: the engine-side work around it is what
// engine_side_costs times.
class FixedMask final : public aerie::TokenConstraint {
 public:
  explicit FixedMask(const std::vector<uint8_t>& allowed) : allowed_(&allowed) {}
  void allowed_tokens(std::vector<uint8_t>& allowed) const override { allowed = *allowed_; }
  bool accept(int64_t) override { return true; }
  bool finished() const override { return false; }
  std::unique_ptr<aerie::TokenConstraint> clone() const override { return std::make_unique<FixedMask>(*allowed_); }

 private:
  const std::vector<uint8_t>* allowed_;
};

// Per sequence and step, at K = 0 (plain) and K = 3: mask_verification_rows over K + 1 rows plus
// mask_draft_logits for K draft rows (the draft speaking the target's vocabulary), median of 50 in us of
// the thread's CPU time (a constant amount of work, so the host's load should not count).
void engine_side_costs(const char* model, const char* mask, const std::vector<uint8_t>& allowed);

// Three masks: inside a plain string (every token without a quote, backslash or control byte), a sparse one
// (tokens that start with a quote), and half the tokens at random (branches as mixed as they can be).
void engine_side_costs(const char* model, const Vocabulary& v) {
  const int64_t n_vocab = int64_t(v.closing.size());
  aerie::Rng rng(5);
  std::vector<uint8_t> string(static_cast<size_t>(n_vocab)), sparse(string.size()), random(string.size());
  for (int64_t t = 0; t < n_vocab; ++t) {
    const std::string_view b = v.trie->token_bytes(int32_t(t));
    string[size_t(t)] = !b.empty() && std::none_of(b.begin(), b.end(),
                                                   [](char c) { return c == '"' || c == '\\' || uint8_t(c) < 0x20; });
    sparse[size_t(t)] = !b.empty() && b[0] == '"';
    random[size_t(t)] = rng.next_unit_float() < 0.5f;
  }
  for (const auto& [name, allowed] : {std::pair<const char*, const std::vector<uint8_t>*>{"string", &string},
                                      {"sparse", &sparse},
                                      {"random", &random}})
    engine_side_costs(model, name, *allowed);
}

void engine_side_costs(const char* model, const char* mask, const std::vector<uint8_t>& allowed) {
  const auto n_vocab = int64_t(allowed.size());
  aerie::Rng rng(6);
  const FixedMask state(allowed);
  aerie::ConstraintScratch scratch;
  std::vector<uint8_t> copy;
  for (const int64_t k : {0, 3}) {
    std::vector<float> logits(static_cast<size_t>((k + 1) * n_vocab));
    for (float& l : logits) l = rng.next_unit_float();
    const std::vector<int64_t> drafts(static_cast<size_t>(k), 1), eos = {0};
    std::vector<double> verify, draft, mask_copies;
    for (int r = 0; r < 50; ++r) {
      double start = thread_cpu_us();
      aerie::mask_verification_rows(state, logits.data(), k + 1, n_vocab, drafts, eos, scratch);
      verify.push_back(thread_cpu_us() - start);
      start = thread_cpu_us();
      for (int64_t d = 0; d < k; ++d) aerie::mask_draft_logits(state, logits.data(), n_vocab, {}, scratch);
      draft.push_back(thread_cpu_us() - start);
      start = thread_cpu_us();
      for (int64_t d = 0; d < 2 * k + 1; ++d) state.allowed_tokens(copy);  // the stand-in's own share
      mask_copies.push_back(thread_cpu_us() - start);
    }
    std::printf("%-12s %-6s mask, K=%lld: verification rows %7.1f us + draft rows %7.1f us per sequence and step "
                "(the stand-in's own mask copies: %5.1f us)\n",
                model, mask, (long long)k, percentiles(verify).p50, percentiles(draft).p50,
                percentiles(mask_copies).p50);
  }
}

}  // namespace

int main(int argc, char** argv) {
  int repeats = 21, walks = 4;
  const char* env = std::getenv("AERIE_TOKENIZER_DIR");
  std::string corpus_path = AERIE_SOURCE_DIR "/bench/grammar/schema_corpus.json";
  std::string tokenizers = env ? env : AERIE_SOURCE_DIR "/.cache/tokenizers";
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--repeats")) repeats = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--walks")) walks = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--corpus")) corpus_path = argv[i + 1];
    else if (!std::strcmp(argv[i], "--tokenizers")) tokenizers = argv[i + 1];
    else if (!std::strcmp(argv[i], "--clock")) g_cpu_clock = !std::strcmp(argv[i + 1], "cpu");
  }
  std::ifstream in(corpus_path);
  if (!in) {
    std::fprintf(stderr, "schema_bench: cannot open %s\n", corpus_path.c_str());
    return 1;
  }
  const Json corpus = Json::parse(in);

  // Compile time.
  std::vector<std::pair<std::string, std::shared_ptr<const aerie::JsonGrammar>>> compiled;
  std::vector<double> medians;
  std::printf("%-22s %12s %8s\n", "schema", "compile us", "nodes");
  for (const Json& entry : corpus) {
    const std::string name = entry.at("name");
    std::vector<double> times;
    std::shared_ptr<const aerie::JsonGrammar> grammar;
    try {
      for (int r = 0; r < repeats; ++r) {
        const auto start = Clock::now();
        grammar = aerie::compile_json_schema(entry.at("schema"));
        times.push_back(microseconds_since(start));
      }
    } catch (const aerie::Error& e) {
      std::printf("%-22s refused: %s\n", name.c_str(), e.what());
      continue;
    }
    const double median = percentiles(times).p50;
    medians.push_back(median);
    compiled.emplace_back(name, grammar);
    std::printf("%-22s %12.1f %8zu\n", name.c_str(), median, grammar->nodes.size());
  }
  const Percentiles c = percentiles(medians);
  std::printf("\ncompile over %zu schemas (median of %d each): p50 %.1f us, p95 %.1f us, max %.1f us\n\n",
              medians.size(), repeats, c.p50, c.p95, c.max);

  // Mask time.
  std::printf("%-12s %8s %8s %10s %10s %10s\n", "vocabulary", "threads", "masks", "p50 us", "p95 us", "max us");
  for (const char* model : {"llama3_1", "deepseek_v3"}) {
    Vocabulary v;
    try {
      v = load_vocabulary(tokenizers + "/" + model);
    } catch (const aerie::Error& e) {
      std::printf("%-12s not loaded: %s\n", model, e.what());
      continue;
    }
    for (const int n_threads : {1, 2}) {
      std::vector<std::vector<double>> per_thread(static_cast<size_t>(n_threads));
      std::vector<std::vector<Slowest>> slowest(static_cast<size_t>(n_threads));
      std::vector<std::vector<std::vector<double>>> by_kind(static_cast<size_t>(n_threads),
                                                            std::vector<std::vector<double>>(kKinds));
      std::vector<std::thread> threads;
      for (int t = 0; t < n_threads; ++t)
        threads.emplace_back([&, t] {
          for (size_t s = 0; s < compiled.size(); ++s)
            for (int w = 0; w < walks; ++w)
              timed_walk(compiled[s].first, compiled[s].second, v, 1000 * s + uint64_t(w) + 7919 * uint64_t(t),
                         per_thread[size_t(t)], slowest[size_t(t)], by_kind[size_t(t)]);
        });
      for (std::thread& thread : threads) thread.join();
      std::vector<double> all;
      for (const auto& times : per_thread) all.insert(all.end(), times.begin(), times.end());
      const Percentiles m = percentiles(all);
      std::vector<Slowest> worst;
      for (const auto& per : slowest)
        for (const Slowest& s : per) note_slow(worst, s);
      std::printf("%-12s %8d %8zu %10.1f %10.1f %10.1f\n", model, n_threads, all.size(), m.p50, m.p95, m.max);
      if (n_threads != 1) continue;
      for (int k = 0; k < kKinds; ++k) {
        const Percentiles p = percentiles(by_kind[0][size_t(k)]);
        if (!by_kind[0][size_t(k)].empty())
          std::printf("    %-16s %6zu masks: p50 %8.1f us, p95 %8.1f us, max %8.1f us\n", kKindNames[k],
                      by_kind[0][size_t(k)].size(), p.p50, p.p95, p.max);
      }
      for (const Slowest& s : worst) std::printf("    %8.1f us  %s after '%s'\n", s.us, s.schema.c_str(), s.output.c_str());
    }
    engine_side_costs(model, v);
  }
  return 0;
}
