// An agent-like workload for the suffix drafter (spec/suffix_drafter.h, issue 42 item 3): sessions of
// multi-turn edits of a file. Each turn's request re-sends the file as it now is, names one edit, and
// asks for the new version, which repeats most of the old one:
//
//   prompt(t) = BOS "File:\n" file(t) "\nEdit: replace \"A\" with \"B\".\nNew file:\n" file(t+1)[0, 8)
//   output(t) = up to |file(t+1)| - 8 tokens, greedy
//
// file(0) is the target's own greedy continuation of a seed sentence cut into lines (so that a model this
// small has something it would write again), and each turn swaps one word of it for another word of the
// file. Every drafter serves every session's turns in order, with one drafter object per mode, so the
// suffix index's shared part sees the earlier turns. Modes: plain decoding, the n-gram drafter, the head
// alone, the suffix drafter over each sequence's own tokens only (--suffix-cache-tokens 0), the suffix
// drafter, and the suffix index beside the head. Reported per mode: output tokens,
// tokens per target forward (output / decode forwards), mean acceptance length (1 + accepted / rounds
// with drafts), acceptance rate, decode tokens/s and end-to-end tokens/s, and whether the output equals
// plain decoding's (greedy: it must).
//
//   build/bench/suffix_agent_bench [MODEL_DIR [HEAD_DIR]] [--sessions N] [--turns N] [--threads N]
//                                  [--repeats N] [--deterministic]
// --deterministic runs every mode batch-invariant (GenerateOptions::deterministic). The run fails (exit 1)
// when a mode's output differs from plain decoding's, naming the turn and token.
//   (defaults: models/aerie-tiny-llama, models/aerie-tiny-llama-eagle3, 4 sessions, 6 turns, 1 thread,
//   3 repeats: the modes take turns, and each reports its fastest repeat)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "engine/engine_generate.h"
#include "models/registry.h"
#include "spec/drafter_registry.h"
#include "spec/suffix_head.h"
#include "tokenizer/tokenizer.h"

namespace aerie {
namespace {

namespace fs = std::filesystem;

const char* const kSeeds[] = {
    "It is a truth universally acknowledged, that a single man in possession of a good fortune",
    "The house stood at the end of the lane, and the garden behind it",
    "When the letter came, she read it twice before she",
    "He had been walking for an hour when the rain began, and",
    "There was no possibility of taking a walk that day.",
    "In the morning the village was quiet, and the old church",
};

std::vector<int64_t> encode(const Tokenizer& tok, const std::string& text, bool bos = false) {
  std::vector<int64_t> ids;
  for (int32_t id : tok.encode(text, /*add_special_tokens=*/bos)) ids.push_back(id);
  return ids;
}


struct Turn {
  std::vector<int64_t> prompt;
  int64_t max_tokens = 0;
};

// The sessions' turns, in the order they are served.
std::vector<Turn> make_workload(Model& target, const Tokenizer& tok, int sessions, int turns) {
  std::vector<Turn> work;
  std::mt19937_64 rng(1234);
  for (int s = 0; s < sessions; ++s) {
    // file(0): the target's greedy continuation of a seed, as lines of text.
    const std::vector<int64_t> seed = encode(tok, kSeeds[s % std::size(kSeeds)], /*bos=*/true);
    const size_t n_special = seed.size() - encode(tok, kSeeds[s % std::size(kSeeds)]).size();
    GenerateOptions g;
    g.max_tokens = 120;
    const GenerateResult r = generate(target, seed, g);
    std::vector<int32_t> ids(seed.begin() + ptrdiff_t(n_special), seed.end());
    ids.insert(ids.end(), r.tokens.begin(), r.tokens.end());
    std::string text = tok.decode(ids, /*skip_special_tokens=*/true);
    for (size_t i = 0, n = 0; i < text.size(); ++i)  // a line break after every 10th space
      if (text[i] == ' ' && ++n % 10 == 0) text[i] = '\n';
    std::vector<std::string> words;
    for (size_t i = 0; i < text.size();) {
      size_t j = text.find_first_of(" \n", i);
      if (j == std::string::npos) j = text.size();
      if (j - i >= 3) words.push_back(text.substr(i, j - i));
      i = j + 1;
    }
    for (int t = 0; t < turns; ++t) {
      // One edit: a word of the file (its first occurrence) replaced by another of its words.
      const std::string from = words[rng() % words.size()], to = words[rng() % words.size()];
      std::string next = text;
      const size_t at = next.find(from);
      if (at != std::string::npos) next.replace(at, from.size(), to);
      Turn turn;
      turn.prompt = encode(tok, "File:\n" + text + "\nEdit: replace \"" + from + "\" with \"" + to + "\".\nNew file:\n",
                           /*bos=*/true);
      const std::vector<int64_t> next_ids = encode(tok, next);
      turn.prompt.insert(turn.prompt.end(), next_ids.begin(), next_ids.begin() + 8);
      turn.max_tokens = int64_t(next_ids.size()) - 8;
      work.push_back(std::move(turn));
      text = next;
    }
  }
  return work;
}

struct ModeResult {
  std::string name;
  int64_t tokens = 0, forwards = 0;
  SpecStats spec;
  double decode_seconds = 0, seconds = 0;
  bool same_as_plain = true;
  std::vector<std::vector<int64_t>> outputs;
};

ModeResult run_mode(const std::string& name, Model& target, Drafter* drafter, ThreadPool& pool,
                    const std::vector<Turn>& work, int64_t k, const ModeResult* plain, bool deterministic) {
  ModeResult m;
  m.name = name;
  SpecOptions spec;
  spec.num_speculative_tokens = k;
  for (size_t i = 0; i < work.size(); ++i) {
    GenerateOptions g;
    g.max_tokens = work[i].max_tokens;
    g.deterministic = deterministic;
    SpecStats stats;
    const auto start = std::chrono::steady_clock::now();
    const GenerateResult r = drafter ? generate_with_engine(target, drafter, pool, work[i].prompt, g, spec, nullptr, &stats)
                                     : generate_with_engine(target, nullptr, pool, work[i].prompt, g, SpecOptions{});
    m.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    m.decode_seconds += r.decode_seconds;
    m.tokens += int64_t(r.tokens.size());
    // Decode forwards: every token after the prefill's first came from a round with drafts or a plain step.
    m.forwards += drafter ? stats.rounds + stats.plain_rounds : int64_t(r.tokens.size()) - 1;
    m.spec.add(stats);
    if (plain && r.tokens != plain->outputs[i]) {
      if (m.same_as_plain) {
        size_t at = 0;
        while (at < r.tokens.size() && at < plain->outputs[i].size() && r.tokens[at] == plain->outputs[i][at]) ++at;
        std::fprintf(stderr, "%s: turn %zu (prompt %zu tokens) differs from plain decoding at output token %zu\n",
                     name.c_str(), i, work[i].prompt.size(), at);
      }
      m.same_as_plain = false;
    }
    m.outputs.push_back(r.tokens);
  }
  return m;
}

int run(int argc, char** argv) {
  const fs::path source(AERIE_SOURCE_DIR);
  std::vector<std::string> positional;
  int sessions = 4, turns = 6, threads = 1, repeats = 3;
  bool deterministic = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--deterministic") {
      deterministic = true;
    } else if ((a == "--sessions" || a == "--turns" || a == "--threads") && i + 1 < argc) {
      const int v = std::atoi(argv[++i]);
      AERIE_CHECK(v >= 1 && v <= 64, a, " must be in [1, 64], got ", argv[i]);
      (a == "--sessions" ? sessions : a == "--turns" ? turns : threads) = v;
    } else {
      positional.push_back(a);
    }
  }
  const fs::path model_dir = positional.size() > 0 ? fs::path(positional[0]) : source / "models/aerie-tiny-llama";
  const std::string head_dir =
      positional.size() > 1 ? positional[1] : (source / "models/aerie-tiny-llama-eagle3").string();
  ThreadPool pool(threads);
  std::unique_ptr<Model> target = load_model(model_dir, pool);
  const Tokenizer tok = Tokenizer::load(model_dir / "tokenizer.json");
  const std::vector<Turn> work = make_workload(*target, tok, sessions, turns);
  int64_t prompt_tokens = 0, budget = 0;
  for (const Turn& t : work) prompt_tokens += int64_t(t.prompt.size()), budget += t.max_tokens;
  std::printf("workload: %d sessions x %d turns, %lld prompt tokens, up to %lld output tokens; %s, head %s, "
              "%d thread(s), fastest of %d repeats\n",
              sessions, turns, (long long)prompt_tokens, (long long)budget, model_dir.filename().c_str(),
              fs::path(head_dir).filename().c_str(), threads, repeats);

  // Each mode: a name, its K and how to make its drafter (null: plain decoding); a fresh drafter per
  // repeat, so every repeat serves the same workload from the same state and only the time varies.
  struct Mode {
    std::string name;
    int64_t k;
    std::function<std::unique_ptr<Drafter>()> make;
  };
  DraftLoadOptions ngram_options, own_only_options, beside_options;
  own_only_options.suffix.cache_tokens = 0;  // each sequence's own tokens: what the shared index adds
  ngram_options.ngram = NgramOptions{2, 4};
  beside_options.suffix.head_k = 3;
  beside_options.suffix_beside_head = true;
  const std::vector<Mode> modes = {
      {"plain", 0, [] { return std::unique_ptr<Drafter>(); }},
      {"ngram 2..4, K=8", 8, [&] { return load_any_drafter("ngram", *target, pool, ngram_options); }},
      {"head, K=3", 3, [&] { return load_any_drafter(head_dir, *target, pool); }},
      {"suffix own only, K<=16", 16, [&] { return load_any_drafter("suffix", *target, pool, own_only_options); }},
      {"suffix, K<=16", 16, [&] { return load_any_drafter("suffix", *target, pool); }},
      {"suffix K<=16 + head K=3", 16, [&] { return load_any_drafter(head_dir, *target, pool, beside_options); }},
  };
  std::vector<ModeResult> results(modes.size());
  SuffixBesideHead::Rounds rounds;
  // Repeats go round the modes (plain, ngram, ..., plain, ngram, ...) so that a burst of load on a shared
  // machine does not fall on one mode; each mode keeps its fastest repeat.
  for (int rep = 0; rep < repeats; ++rep) {
    for (size_t m = 0; m < modes.size(); ++m) {
      std::unique_ptr<Drafter> drafter = modes[m].make();
      ModeResult r = run_mode(modes[m].name, *target, drafter.get(), pool, work, modes[m].k,
                              m == 0 ? nullptr : &results[0], deterministic);
      if (auto* both = dynamic_cast<SuffixBesideHead*>(drafter.get())) rounds = both->rounds();
      if (rep == 0 || r.decode_seconds < results[m].decode_seconds) results[m] = std::move(r);
    }
  }

  std::printf("%-24s %7s %9s %9s %8s %10s %10s %8s\n", "mode", "tokens", "tok/fwd", "accept_len", "accept",
              "decode t/s", "e2e t/s", "=plain");
  for (const ModeResult& m : results)
    std::printf("%-24s %7lld %9.2f %9.2f %7.1f%% %10.1f %10.1f %8s\n", m.name.c_str(), (long long)m.tokens,
                double(m.tokens - int64_t(work.size())) / double(std::max<int64_t>(m.forwards, 1)),
                m.spec.rounds > 0 ? m.spec.mean_acceptance_length() : 1.0, 100.0 * m.spec.acceptance_rate(),
                double(m.tokens - int64_t(work.size())) / m.decode_seconds, double(m.tokens) / m.seconds,
                m.same_as_plain ? "yes" : "NO");
  std::printf("suffix + head: the index drafted %lld rounds, the head %lld\n", (long long)rounds.index,
              (long long)rounds.head);
  for (const ModeResult& m : results)
    if (!m.same_as_plain) return 1;
  return 0;
}

}  // namespace
}  // namespace aerie

int main(int argc, char** argv) {
  try {
    return aerie::run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "suffix_agent_bench: %s\n", e.what());
    return 1;
  }
}
