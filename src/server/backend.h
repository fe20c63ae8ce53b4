// What the HTTP layer serves once the model is loaded: the engine (through its loop thread), the
// tokenizer, the parsed chat template and the tool-call parser of the model family.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/engine_loop.h"
#include "grammar/reasoning_constraint.h"
#include "grammar/token_trie.h"
#include "jinja/chat_template.h"
#include "server/choice_events.h"
#include "server/reasoning.h"
#include "server/tool_parser.h"
#include "tokenizer/tokenizer.h"

namespace aerie::server {

// The model as `aerie serve` (or a test) hands it to the server. The engine and tokenizer must outlive
// the server.
struct ServedModel {
  Engine* engine = nullptr;
  const Tokenizer* tokenizer = nullptr;
  std::vector<int64_t> eos_ids;               // config.json + generation_config.json end-of-sequence ids
  std::optional<ToolParserKind> tool_parser;  // detected from the checkpoint, or --tool-parser
  std::string chat_template;                  // Jinja source; "" when the model has none
  int64_t n_vocab = 0;                        // the model's (token-id prompts are checked against it)
  double synthetic_acceptance = -1.0;         // the engine's (serve --synthetic-acceptance); < 0: none
  std::optional<ReasoningParserKind> reasoning_parser;  // chat: <think> blocks -> reasoning_content
  // The engine's relaxed thinking acceptance (lossy; serve --thinking-acceptance relaxed): chat requests
  // whose prompt opens a <think> block start inside it, and every chat response says the server runs it.
  std::optional<RelaxedAcceptance> relaxed_thinking;
  // serve --scheduling-policy priority: requests' `priority` orders admission and preemption
  // (RequestOptions::priority). Off (fcfs), a request with a non-zero priority is refused, as vLLM does.
  bool priority_scheduling = false;
  // serve --lora-modules: each adapter's served name and folder, in the engine's adapter order (index i is
  // RequestOptions::adapter i). A request whose "model" names one runs with it.
  struct Adapter {
    std::string name, path;
  };
  std::vector<Adapter> lora_modules;
  // Called by the engine loop while it has no work (a tensor-parallel driver's heartbeat); may be empty.
  std::function<void()> on_idle;
};

struct Backend {
  ServedModel model;
  std::optional<ChatTemplate> chat_template;
  std::unique_ptr<EngineLoop> loop;
  int64_t n_vocab = 0;
  int64_t max_length = 0;
  std::atomic<int> active_generations{0};  // HTTP requests holding engine work (for the drain)
  // The vocabulary as a byte trie for structured output, built by the first request that needs it.
  std::once_flag vocabulary_once;
  std::shared_ptr<const TokenTrie> vocabulary;
  // The vocabulary as the reasoning split reads the output text, for structured output after </think>;
  // [1]: special tokens dropped (the text of a request without a tool-call parser), [0]: kept.
  std::once_flag think_vocabulary_once[2];
  std::shared_ptr<const ThinkVocabulary> think_vocabulary[2];
};

using LogFunction = std::function<void(const std::string& line)>;

}  // namespace aerie::server
