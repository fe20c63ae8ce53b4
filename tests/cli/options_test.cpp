// The option table (cli/options.h): every option declared completely (help; a default of its own kind,
// within its own range or choices, or kOptional, which the table's helpers make every row state; a range,
// a choice set, or free text said to be so); the parser refusing what the declaration refuses, naming the
// option and the range or choices; each command's --help listing exactly its rows, defaults printed from
// the typed values; and the parsed values reaching the config structs (cli/configs.h).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "cli/bench_spec.h"
#include "cli/common.h"
#include "cli/configs.h"
#include "cli/options.h"
#include "core/error.h"
#include "spec/ngram_drafter.h"
#include "error_of.h"

namespace aerie::cli {
namespace {


std::string refusal(Command command, const std::string& name, const std::string& value) {
  return error_of([&] { parse_options(command, {name, value}); });
}

// Whether `fallback` is a value the option itself would accept.
bool accepts(const OptionSpec& spec, const Default& fallback) {
  if (!spec.choices.empty()) {
    for (const std::string& c : spec.choices)
      if (fallback.text() == c) return true;
    return false;
  }
  if (!spec.range) return std::holds_alternative<std::string>(fallback.value());
  const Range& r = *spec.range;
  if (r.list) return error_of([&] { Args({spec.name, fallback.text()}, {spec}); }) == "(no error)";
  if (r.integer) {
    const auto* v = std::get_if<int64_t>(&fallback.value());
    return v != nullptr && *v >= r.min_integer && *v <= r.max_integer;
  }
  const auto* v = std::get_if<double>(&fallback.value());
  return v != nullptr && std::isfinite(*v) && (r.min_exclusive ? *v > r.min : *v >= r.min) && *v <= r.max;
}

TEST(OptionTable, EveryOptionIsDeclaredCompletely) {
  for (Command command : kAllCommands) {
    for (const OptionSpec& spec : options_for(command)) {
      SCOPED_TRACE(std::string(command_name(command)) + " " + spec.name);
      EXPECT_EQ(spec.name.rfind("--", 0), 0u);
      EXPECT_FALSE(spec.help.empty());
      if (!spec.takes_value) {  // a flag: absent is false
        EXPECT_FALSE(spec.range || !spec.choices.empty() || !spec.free_text.empty() || spec.fallback.given());
        continue;
      }
      // Exactly one of a range, a choice set and free text.
      EXPECT_EQ(int(spec.range.has_value()) + int(!spec.choices.empty()) + int(!spec.free_text.empty()), 1);
      if (spec.fallback.given()) {
        EXPECT_TRUE(accepts(spec, spec.fallback)) << spec.fallback.text();
      }
    }
  }
}

TEST(OptionTable, ANameDeclaredTwiceServesDisjointCommands) {
  const std::vector<OptionRow>& table = option_table();
  for (size_t i = 0; i < table.size(); ++i)
    for (size_t j = i + 1; j < table.size(); ++j)
      if (table[i].spec.name == table[j].spec.name) {
        EXPECT_FALSE(table[i].commands.overlaps(table[j].commands)) << table[i].spec.name;
      }
  // Every command's options are distinct, and a per-command default or range belongs to a command of the row.
  for (Command command : kAllCommands) {
    std::set<std::string> names;
    for (const OptionSpec& spec : options_for(command))
      EXPECT_TRUE(names.insert(spec.name).second) << command_name(command) << " " << spec.name;
  }
  for (const OptionRow& row : table) {
    for (const auto& [command, fallback] : row.command_defaults) {
      EXPECT_TRUE(row.commands.has(command)) << row.spec.name;
    }
    for (const auto& [command, range] : row.command_ranges) {
      EXPECT_TRUE(row.commands.has(command)) << row.spec.name;
    }
  }
}

// One past either end of every range, in every command, is refused with the option's name and range.
TEST(OptionTable, AValueOutOfRangeIsRefusedNamingTheFlagAndRange) {
  int checked = 0;
  for (Command command : kAllCommands) {
    for (const OptionSpec& spec : options_for(command)) {
      if (!spec.range) continue;
      const Range& r = *spec.range;
      std::vector<std::string> outside = {"x"};
      if (r.integer) {
        if (r.min_integer > INT64_MIN) outside.push_back(std::to_string(r.min_integer - 1));
        if (r.max_integer < INT64_MAX) outside.push_back(std::to_string(r.max_integer + 1));
      } else {
        outside.push_back(r.min_exclusive ? str_cat(r.min) : str_cat(r.min - 1));
        outside.push_back(str_cat(r.max + 1));
      }
      for (const std::string& value : outside) {
        EXPECT_EQ(refusal(command, spec.name, value),
                  str_cat("option ", spec.name, " must be ", r.text(), ", got '", value, "'"))
            << command_name(command);
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 150);
}

TEST(OptionTable, AWrongChoiceIsRefusedNamingTheChoices) {
  int checked = 0;
  for (Command command : kAllCommands) {
    for (const OptionSpec& spec : options_for(command)) {
      if (spec.choices.empty()) continue;
      const std::string message = refusal(command, spec.name, "no-such-choice");
      EXPECT_EQ(message.rfind(spec.name + " must be ", 0), 0u) << message;
      for (const std::string& choice : spec.choices) EXPECT_NE(message.find(choice), std::string::npos) << message;
      for (const std::string& choice : spec.choices)
        EXPECT_EQ(refusal(command, spec.name, choice), "(no error)") << command_name(command) << " " << spec.name;
      ++checked;
    }
  }
  EXPECT_GT(checked, 20);
  EXPECT_EQ(refusal(Command::kServe, "--tool-parser", "hermes"),
            "--tool-parser must be deepseek_v3, deepseek_v31 or llama3_json, got 'hermes'");
  EXPECT_EQ(refusal(Command::kBench, "--bf16-activations", "fp8"),
            "--bf16-activations must be split, rounded or both, got fp8");
  // An alias is accepted without being listed.
  EXPECT_EQ(kv_cache_dtype(parse_options(Command::kServe, {"--kv-cache-dtype", "fp8_e4m3"})), KvDType::kFP8E4M3);
}

// The options a --help text lists, in order.
std::vector<std::string> listed(const std::string& help) {
  std::vector<std::string> names;
  std::istringstream lines(help);
  for (std::string line; std::getline(lines, line);)
    if (line.rfind("  --", 0) == 0) names.push_back(line.substr(2, line.find(' ', 2) - 2));
  return names;
}

TEST(OptionTable, EachCommandsHelpListsExactlyItsRows) {
  const std::vector<std::pair<Command, int (*)(const std::vector<std::string>&)>> commands = {
      {Command::kGenerate, run_generate},
      {Command::kServe, run_serve},
      {Command::kLogits, run_logits},
      {Command::kTokenize, run_tokenize},
      {Command::kBench, run_bench},
      {Command::kBenchSpec, run_bench_spec},
      {Command::kBenchEngine, run_bench_engine},
      {Command::kBenchAccept, run_bench_accept},
      {Command::kBenchQuality, run_bench_quality}};
  for (const auto& [command, run] : commands) {
    SCOPED_TRACE(command_name(command));
    std::vector<std::string> expected;
    for (const OptionRow& row : option_table())
      if (row.commands.has(command)) expected.push_back(row.spec.name);
    ::testing::internal::CaptureStdout();
    ASSERT_EQ(run({"--help"}), 0);
    const std::string help = ::testing::internal::GetCapturedStdout();
    EXPECT_EQ(help.rfind(str_cat("usage: aerie ", command_name(command), " [options]\n"), 0), 0u) << help;
    EXPECT_EQ(listed(help), expected) << help;
    // Each default is printed from its typed value, in the option's own paragraph.
    for (const OptionSpec& spec : options_for(command)) {
      if (!spec.fallback.given()) continue;
      const size_t begin = help.find("  " + spec.name + " ");
      const std::string paragraph = help.substr(begin, help.find("\n  --", begin + 1) - begin);
      EXPECT_NE(paragraph.find(" (default " + spec.fallback.text() + ")"), std::string::npos) << paragraph;
    }
  }
  EXPECT_NE(command_usage(Command::kServe).find("rows per engine step (default 512); an integer in [1, 1048576]"),
            std::string::npos);
  EXPECT_NE(command_usage(Command::kBench).find("prefill timed; bench-spec"), std::string::npos);
  EXPECT_NE(command_usage(Command::kBench).find("(default 512); an integer in [1, 16777216]"), std::string::npos);
  EXPECT_NE(command_usage(Command::kBenchEngine).find("(default 4294967296); an integer in [1, 70368744177664]"),
            std::string::npos);
}

TEST(OptionConfigs, ServeAndBenchEngineValuesReachEngineConfig) {
  const EngineConfig engine_default;
  for (Command command : {Command::kServe, Command::kBenchEngine}) {
    SCOPED_TRACE(command_name(command));
    const EngineConfig config = engine_config(
        parse_options(command, {"--max-batch-tokens", "77", "--max-prefill-rows-while-decoding", "9",
                                "--kv-cache-memory", "123456", "--kv-cache-dtype", "fp8", "--deterministic",
                                "--num-speculative-tokens-per-batch-size", "1-4:3,5-:0"}));
    EXPECT_EQ(config.max_batch_tokens, 77);
    EXPECT_EQ(config.max_prefill_rows_while_decoding, 9);
    EXPECT_EQ(config.kv_cache_memory, 123456u);
    EXPECT_EQ(config.kv_cache_dtype, KvDType::kFP8E4M3);
    EXPECT_TRUE(config.deterministic);
    EXPECT_EQ(config.k_by_batch_size.k_for(2, -1), 3);
    EXPECT_EQ(config.k_by_batch_size.k_for(9, -1), 0);
    const EngineConfig plain = engine_config(parse_options(command, {}));
    EXPECT_EQ(plain.max_batch_tokens, engine_default.max_batch_tokens);
    EXPECT_EQ(plain.max_prefill_rows_while_decoding, engine_default.max_prefill_rows_while_decoding);
    EXPECT_EQ(plain.max_num_seqs, engine_default.max_num_seqs);
    EXPECT_FALSE(plain.deterministic);
  }
  const EngineConfig serve = engine_config(
      parse_options(Command::kServe, {"--max-num-seqs", "5", "--max-length", "300", "--max-queue", "40"}));
  EXPECT_EQ(serve.max_num_seqs, 5);
  EXPECT_EQ(serve.max_length, 300);
  EXPECT_EQ(serve.max_queue, 41);  // one beyond the server's, whose 429 answers first
  // Where the commands' defaults differ from EngineConfig's.
  EXPECT_EQ(engine_config(parse_options(Command::kServe, {})).kv_cache_memory, engine_default.kv_cache_memory);
  EXPECT_EQ(engine_config(parse_options(Command::kServe, {})).max_queue, 256 + 1);
  EXPECT_EQ(engine_config(parse_options(Command::kBenchEngine, {})).kv_cache_memory, uint64_t{4} << 30);
  EXPECT_EQ(engine_config(parse_options(Command::kBenchEngine, {})).max_queue, engine_default.max_queue);
}

TEST(OptionConfigs, GenerateValuesReachItsRequest) {
  const GenerateOptions o = generate_options(parse_options(Command::kGenerate, {"--max-tokens",
                                                                                "7",
                                                                                "--max-length",
                                                                                "99",
                                                                                "--kv-cache-dtype",
                                                                                "f32",
                                                                                "--deterministic",
                                                                                "--temperature",
                                                                                "0.5",
                                                                                "--top-k",
                                                                                "3",
                                                                                "--top-p",
                                                                                "0.9",
                                                                                "--min-p",
                                                                                "0.1",
                                                                                "--seed",
                                                                                "42",
                                                                                "--presence-penalty",
                                                                                "0.25",
                                                                                "--frequency-penalty",
                                                                                "-0.5",
                                                                                "--repetition-penalty",
                                                                                "1.5"}));
  EXPECT_EQ(o.max_tokens, 7);
  EXPECT_EQ(o.max_length, 99);
  EXPECT_EQ(o.kv_cache_dtype, KvDType::kF32);
  EXPECT_TRUE(o.deterministic);
  EXPECT_FLOAT_EQ(o.sampling.temperature, 0.5f);
  EXPECT_EQ(o.sampling.top_k, 3);
  EXPECT_FLOAT_EQ(o.sampling.top_p, 0.9f);
  EXPECT_FLOAT_EQ(o.sampling.min_p, 0.1f);
  EXPECT_EQ(o.sampling.seed, 42u);
  EXPECT_EQ(o.penalties, (Penalties{0.25f, -0.5f, 1.5f}));
  const GenerateOptions plain = generate_options(parse_options(Command::kGenerate, {}));
  EXPECT_EQ(plain.max_tokens, GenerateOptions{}.max_tokens);
  EXPECT_EQ(plain.sampling.temperature, SamplingParams{}.temperature);
  EXPECT_EQ(plain.sampling.top_p, SamplingParams{}.top_p);
  EXPECT_EQ(plain.penalties, Penalties{});
}

TEST(OptionConfigs, SpeculativeOptionsNeedADrafterAndReachSpecOptions) {
  EXPECT_EQ(
      error_of([] {
        spec_options(parse_options(Command::kServe, {"--num-speculative-tokens-per-batch-size", "1-:2"}), nullptr);
      }),
      "--num-speculative-tokens-per-batch-size needs --draft");
  EXPECT_EQ(error_of([] {
              spec_options(parse_options(Command::kGenerate, {"--spec-tree-depth", "3"}), nullptr);
            }),
            "--spec-tree-depth needs --draft");
  NgramDrafter ngram{NgramOptions{}};
  const SpecOptions fixed = spec_options(parse_options(Command::kGenerate, {}), &ngram);
  EXPECT_EQ(fixed.num_speculative_tokens, SpecOptions{}.num_speculative_tokens);
  EXPECT_FALSE(fixed.adaptive_k);
  EXPECT_LT(fixed.synthetic_acceptance, 0.0);
  const SpecOptions spec =
      spec_options(parse_options(Command::kServe, {"--num-speculative-tokens", "auto:5", "--draft-proposal", "argmax",
                                                   "--synthetic-acceptance", "0.3", "--spec-tree-top-k", "2"}),
                   &ngram);
  EXPECT_EQ(spec.num_speculative_tokens, 5);
  EXPECT_TRUE(spec.adaptive_k);
  EXPECT_EQ(spec.proposal, DraftProposal::kArgmax);
  EXPECT_DOUBLE_EQ(spec.synthetic_acceptance, 0.3);
  EXPECT_EQ(spec.tree.top_k, 2);
  const std::optional<RelaxedAcceptance> relaxed = relaxed_acceptance(
      parse_options(Command::kBenchAccept, {"--thinking-acceptance", "relaxed", "--relaxed-top-k", "4"}));
  ASSERT_TRUE(relaxed.has_value());
  EXPECT_EQ(relaxed->top_k, 4);
  EXPECT_DOUBLE_EQ(relaxed->delta, 0.6);
  EXPECT_FALSE(relaxed_acceptance(parse_options(Command::kServe, {})).has_value());
}

TEST(OptionConfigs, ServeValuesReachServerOptions) {
  const server::ServerOptions o = server_options(
      parse_options(Command::kServe,
                    {"--model", "dir", "--host", "0.0.0.0", "--port", "1234", "--http-threads", "3", "--max-queue",
                     "12", "--limit", "http.max_body_bytes=5000,http.body_deadline_s=7", "--max-header-bytes", "999"}));
  EXPECT_EQ(o.host, "0.0.0.0");
  EXPECT_EQ(o.port, 1234);
  EXPECT_EQ(o.http_threads, 3);
  EXPECT_EQ(o.max_in_flight, 12);
  EXPECT_EQ(o.served_model_name, "dir");      // the --model argument unless named
  EXPECT_EQ(o.limits.max_body_bytes, 5000u);  // --limit, where no specific flag says otherwise
  EXPECT_EQ(o.limits.body_deadline_s, 7);
  EXPECT_EQ(o.limits.max_header_bytes, 999u);
  EXPECT_EQ(server_options(
                parse_options(Command::kServe, {"--limit", "http.max_body_bytes=5000", "--max-request-bytes", "6000"}))
                .limits.max_body_bytes,
            6000u);  // the specific flag wins
  const server::ServerOptions plain = server_options(parse_options(Command::kServe, {"--served-model-name", "m"}));
  const server::ServerOptions defaults;
  EXPECT_EQ(plain.served_model_name, "m");
  EXPECT_EQ(plain.port, defaults.port);
  EXPECT_EQ(plain.host, defaults.host);
  EXPECT_EQ(plain.limits.max_body_bytes, HttpLimits{}.max_body_bytes);
  EXPECT_EQ(plain.limits.keep_alive_idle_s, HttpLimits{}.keep_alive_idle_s);
}

TEST(OptionConfigs, BenchSpecValuesReachItsConfig) {
  const SpecBenchConfig cfg = spec_bench_config(
      parse_options(Command::kBenchSpec,
                    {"--num-speculative-tokens", "2,auto:4", "--prompt-tokens", "77", "--decode-tokens", "9",
                     "--repeats", "2", "--rates", "0.25,1", "--kv-cache-dtype", "f32"}));
  ASSERT_EQ(cfg.runs.size(), 2u);
  EXPECT_EQ(cfg.k, 4);
  EXPECT_TRUE(cfg.runs[1].adaptive_k);
  EXPECT_EQ(cfg.prompt_tokens, 77);
  EXPECT_EQ(cfg.decode_tokens, 9);
  EXPECT_EQ(cfg.repeats, 2);
  EXPECT_EQ(cfg.synthetic_rates, (std::vector<double>{0.25, 1.0}));
  EXPECT_EQ(cfg.kv_cache_dtype, KvDType::kF32);
  const SpecBenchConfig plain = spec_bench_config(parse_options(Command::kBenchSpec, {}));
  EXPECT_EQ(plain.k, 3);
  EXPECT_EQ(plain.prompt_tokens, 128);
  EXPECT_EQ(plain.synthetic_rates, (std::vector<double>{0.5, 0.7, 0.9}));
  EXPECT_NE(error_of([] {
              spec_bench_config(parse_options(Command::kBenchSpec, {"--rates", "0.5,2"}));
            }).find("--rates: '2' is not a rate in [0, 1]"),
            std::string::npos);
}

TEST(OptionConfigs, BenchSpecTreesAndTheSyntheticModel) {
  const SpecBenchConfig cfg = spec_bench_config(
      parse_options(Command::kBenchSpec, {"--num-speculative-tokens", "4", "--trees", "2:4:8,3:6:16",
                                          "--synthetic-depth-decay", "0.9", "--synthetic-sibling-rate", "0.2"}));
  ASSERT_EQ(cfg.runs.size(), 3u);
  EXPECT_EQ(cfg.k, 4);
  EXPECT_FALSE(cfg.runs[0].tree.enabled());
  EXPECT_EQ(cfg.runs[1].tree.top_k, 2);
  EXPECT_EQ(cfg.runs[1].tree.depth, 4);
  EXPECT_EQ(cfg.runs[2].tree.total_tokens, 16);
  for (const SpecOptions& run : cfg.runs) {
    EXPECT_DOUBLE_EQ(run.synthetic_depth_decay, 0.9);
    EXPECT_DOUBLE_EQ(run.synthetic_sibling_rate, 0.2);
  }
  const SpecBenchConfig plain = spec_bench_config(parse_options(Command::kBenchSpec, {}));
  EXPECT_DOUBLE_EQ(plain.runs[0].synthetic_depth_decay, 1.0);
  EXPECT_DOUBLE_EQ(plain.runs[0].synthetic_sibling_rate, kDefaultSyntheticSiblingRate);
  EXPECT_NE(error_of([] {
              parse_options(Command::kBenchSpec, {"--synthetic-depth-decay", "1.5"});
            }).find("--synthetic-depth-decay"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              spec_bench_config(parse_options(Command::kBenchSpec, {"--trees", "2:4"}));
            }).find("TOP_K:DEPTH:TOKENS"),
            std::string::npos);
  NgramDrafter ngram{NgramOptions{}};
  EXPECT_EQ(error_of([&] {
              spec_options(parse_options(Command::kGenerate, {"--synthetic-sibling-rate", "0.5"}), &ngram);
            }),
            "--synthetic-sibling-rate needs --synthetic-acceptance");
  const SpecOptions spec = spec_options(
      parse_options(Command::kServe, {"--synthetic-acceptance", "0.7", "--synthetic-depth-decay", "0.8"}), &ngram);
  EXPECT_DOUBLE_EQ(spec.synthetic_depth_decay, 0.8);
  EXPECT_DOUBLE_EQ(spec.synthetic_sibling_rate, kDefaultSyntheticSiblingRate);
}

}  // namespace
}  // namespace aerie::cli
