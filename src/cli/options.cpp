#include "cli/options.h"

#include <cstdint>

#include "cli/common.h"
#include "cli/default_model.h"
#include "cli/speculative_tokens.h"
#include "core/error.h"
#include "core/limits.h"
#include "engine/engine.h"
#include "engine/generator.h"
#include "sample/penalties.h"
#include "server/http_server.h"
#include "spec/ngram_drafter.h"
#include "spec/suffix_drafter.h"

namespace aerie::cli {
namespace {

using enum Command;

// The kinds of option; every value-taking one states its default, or kOptional.
OptionSpec flag(const char* name, std::string help) { return OptionSpec(name, false, std::move(help)); }

OptionSpec ranged(const char* name, Range range, Default fallback, std::string help) {
  OptionSpec s(name, true, std::move(help), range);
  s.fallback = std::move(fallback);
  return s;
}

OptionSpec one_of(const char* name, std::vector<std::string> choices, Default fallback, std::string help) {
  OptionSpec s(name, true, std::move(help));
  s.choices = std::move(choices);
  s.fallback = std::move(fallback);
  return s;
}

// Free text: a path, a name, or a form the command reads itself (`what` says which, in --help).
OptionSpec text(const char* name, const char* what, Default fallback, std::string help) {
  OptionSpec s(name, true, std::move(help));
  s.free_text = what;
  s.fallback = std::move(fallback);
  return s;
}

OptionSpec with_aliases(OptionSpec s, std::vector<std::string> aliases) {
  s.aliases = std::move(aliases);
  return s;
}

OptionSpec multiple(OptionSpec s) {
  s.multiple = true;
  return s;
}

OptionSpec bare_refusal(OptionSpec s) {
  s.bare_refusal = true;
  return s;
}

constexpr CommandSet kEveryCommand = {kGenerate,  kServe,       kLogits,      kTokenize,    kBench,
                                      kBenchSpec, kBenchEngine, kBenchAccept, kBenchQuality};
constexpr CommandSet kModelCommands = kEveryCommand.without(kTokenize);
// The commands that load one drafter through cli/draft.h (bench-accept reads a list of them).
constexpr CommandSet kDraftCommands = {kGenerate, kServe, kLogits, kBenchSpec, kBenchEngine};
constexpr CommandSet kSpeculating = {kGenerate, kServe, kBenchEngine};

// The rows of the model and how it runs.
std::vector<OptionRow> model_rows() {
  const WeightChoice weights;
  const std::vector<std::string> formats = {"as-stored", "int8", "int4"};
  return {
      {text("--model", "PATH", kOptional,
            "checkpoint folder (config.json + safetensors or pytorch_model.bin), or a GGUF file; generate and "
            "bench-accept without it: the shipped aerie-tiny-llama; tokenize reads only its tokenizer"),
       kEveryCommand},
      {ranged("--threads", integers(0, 1024), 0,
              "worker threads (0: every core, shared among the ranks of this machine under mpirun)"),
       kModelCommands},
      {flag("--quiet", "no loading messages"), kModelCommands},
      {bare_refusal(one_of("--bf16-activations", {"split", "rounded"}, kOptional,
                           "BF16-weight matmuls round activations to one bf16 (rounded, as llama.cpp does) or "
                           "split them into two bf16 parts (float32-exact to ~1e-5, twice the dot-product work); "
                           "absent: AERIE_BF16_ACTIVATIONS, else rounded; int8 weights with one scale per channel "
                           "decode on int8 activations per block of 256 when rounded, int16 per row when split")),
       kModelCommands.without(kBench),
       {{kLogits, "split"}, {kBenchQuality, "rounded"}}},
      {bare_refusal(one_of("--bf16-activations", {"split", "rounded", "both"}, "both",
                           "the activation modes to time (see generate --help), each in turn")),
       {kBench}},
      {one_of("--weight-memory", {"auto", "mapped", "hugepages"}, "mapped",
              "view the weight files mapped in place, or copy them into memory backed by 2 MiB transparent huge "
              "pages (fewer page walks while decoding; costs a copy at load); auto: hugepages when transparent huge "
              "pages are enabled, the weights are over 1 GiB and under 80% of available memory"),
       kModelCommands,
       {{kServe, "auto"}}},  // a server loads once and decodes for hours
      {one_of("--weights", formats, "as-stored",
              "int8 or int4: quantise every projection and the output head (target and draft head) at load, to "
              "symmetric int8 with one scale per output channel (or per --int8-group inputs), or to asymmetric "
              "int4 with a scale and zero point per --int4-group inputs; int8 (compressed-tensors), GPTQ and AWQ "
              "checkpoints load as they are either way"),
       kModelCommands},
      {ranged("--int8-group", integers(0, 65536), weights.int8_group,
              "with --weights int8: inputs per scale, a multiple of 32 (0: per channel)"),
       kModelCommands},
      {ranged("--int4-group", integers(0, 65536), weights.int4_group,
              "with --weights int4: inputs per scale and zero point, a multiple of 64 (0: per channel)"),
       kModelCommands},
      {ranged("--tensor-parallel", integers(1, 1024), 1,
              "T: split every layer's attention heads and FFN over the T ranks of `mpirun -np T` (generate, serve, "
              "logits, bench and bench-engine; F32/BF16/F16 weights, and FP8 on whole 128x128 tiles; Llama 3: T "
              "must divide num_key_value_heads; DeepSeek-V3: also shares the routed experts out, whole, over the "
              "ranks)"),
       kModelCommands},
      {ranged("--expert-parallel", integers(1, 1024), 1,
              "E: share DeepSeek-V3's routed experts out over the E ranks of `mpirun -np E`, keeping attention "
              "and dense layers whole on every rank (one all-reduce per MoE layer)"),
       kModelCommands},
      {ranged("--data-parallel", integers(1, 1024), 1,
              "D: DeepSeek-V3 over the D ranks of `mpirun -np D` with data-parallel attention: each request's "
              "attention and KV cache live on one rank (the KV pool is split D ways, each rank holding the size "
              "one process would), the routed experts are shared out as with --expert-parallel (serve, generate, "
              "bench-engine, logits, bench; --expert-parallel may be given too, equal to D)"),
       kModelCommands},
      {with_aliases(one_of("--kv-cache-dtype", {"auto", "bf16", "f32", "fp8"}, "auto",
                           "how KV cache rows are stored, target and draft head alike: auto (= bf16), bf16, f32 or "
                           "fp8 (2, 4 or 1 byte a value; fp8 E4M3 adds an f32 scale per kv head per position)"),
                    {"bfloat16", "float32", "fp8_e4m3"}),
       kModelCommands,
       {{kLogits, "f32"}}},  // a reference check: exact KV unless asked
      {text("--lora", "PATH", kOptional,
            "a PEFT LoRA adapter folder (adapter_config.json + adapter_model.safetensors) the target runs with; "
            "the draft head drafts for the base model and verification is against the adapted target "
            "(docs/lora.md; Llama 3 targets)"),
       {kGenerate, kBenchAccept}},
      {multiple(text("--lora-modules", "NAME=PATH ...", kOptional,
                     "LoRA adapters to serve, as vLLM takes them: name=DIR (or {\"name\": ..., \"path\": ...}), "
                     "several after one flag or the flag repeated; a request whose \"model\" is a name runs with "
                     "that adapter, and /v1/models lists each with its parent (docs/lora.md)")),
       {kServe}},
      {ranged("--max-lora-rank", integers(1, kMaxLoraRankLimit), kDefaultMaxLoraRank,
              "the largest rank r an adapter may have; a larger one is refused at load"),
       {kGenerate, kServe, kBenchAccept}},
  };
}

// The rows of the prompt.
std::vector<OptionRow> prompt_rows() {
  return {
      {text("--ids", "LIST", kOptional,
            "comma-separated token ids: the prompt (generate), the one sequence prefilled (logits), the "
            "sequence scored (bench-quality; absent: --prompt-tokens seeded ids)"),
       {kGenerate, kLogits, kBenchQuality}},
      {text("--prompt", "TEXT", kOptional, "prompt text (encoded with the model's tokenizer.json)"), {kGenerate}},
      {text("--text", "TEXT", kOptional, "text to encode (BOS added as the tokenizer's post-processor says)"),
       {kTokenize}},
      {text("--file", "FILE", kOptional,
            "read the text from a file (generate: the prompt; bench-quality: the text scored, encoded with "
            "--model's tokenizer without special tokens)"),
       {kGenerate, kTokenize, kBenchQuality}},
      {flag("--chat", "render the prompt as a user message with the model's chat template"), {kGenerate}},
      {text("--chat", "FILE", kOptional,
            "a conversation JSON file (list of messages, or {\"messages\", \"tools\"}), rendered with the chat "
            "template, generation prompt added"),
       {kTokenize}},
      {text("--system", "TEXT", kOptional, "with --chat: a system message before it"), {kGenerate}},
      {text("--messages", "FILE", kOptional,
            "a conversation as JSON (a list of messages, or {\"messages\", \"tools\"})"),
       {kGenerate}},
      {text("--chat-template", "FILE", kOptional, "a Jinja chat template file instead of tokenizer_config.json's"),
       {kGenerate, kServe, kTokenize}},
      {text("--chat-kwargs", "JSON", kOptional,
            "extra chat template variables as a JSON object, e.g. '{\"thinking\":true}'"),
       {kGenerate, kTokenize}},
      {text("--tokenizer", "DIR", kOptional, "folder with tokenizer.json (absent: the model folder)"),
       {kGenerate, kServe, kTokenize, kBenchAccept}},
      {flag("--no-special", "do not add BOS (text input only)"), {kTokenize}},
      {flag("--ids-only", "print only the comma-separated ids"), {kTokenize}},
  };
}

// The rows of drafting and verification.
std::vector<OptionRow> draft_rows() {
  const NgramOptions ngram;
  const SuffixOptions suffix;
  const std::vector<std::string> formats = {"as-stored", "int8", "int4"};
  const std::string k = std::to_string(SpecOptions{}.num_speculative_tokens);
  return {
      {text("--draft", "PATH", kOptional,
            "EAGLE-1 or EAGLE-3 draft head folder, a draft model folder (a small model of the target's "
            "tokenizer), 'mtp' (a DeepSeek-V3 target's own MTP layer), 'ngram' (prompt lookup, any target), "
            "'suffix' (a suffix index over the sequence and earlier requests, any target) or "
            "'none'; bench-accept: a comma-separated list, each measured in turn (absent: the shipped EAGLE-3 "
            "head with the shipped model)"),
       kDraftCommands | CommandSet{kBenchAccept}},
      {ranged("--ngram-min", integers(1, 64), ngram.min_n,
              "with --draft ngram: the shortest n-gram matched (only --ngram-max given: the same)"),
       kDraftCommands | CommandSet{kBenchAccept}},
      {ranged("--ngram-max", integers(1, 64), ngram.max_n,
              "with --draft ngram: the longest n-gram matched, tried first (only --ngram-min given: the same)"),
       kDraftCommands | CommandSet{kBenchAccept}},
      {ranged("--suffix-min-match", integers(1, SuffixOptions::kMaxMatch), suffix.min_match,
              "with --draft suffix or --suffix-draft: the shortest repeat (tokens) the suffix index drafts from"),
       kDraftCommands | CommandSet{kBenchAccept}},
      {ranged("--suffix-factor", numbers(0, SuffixOptions::kMaxFactor), suffix.factor,
              "with --draft suffix or --suffix-draft: drafts per matched token (K = floor(F x match length), at "
              "most --num-speculative-tokens); must be above 0"),
       kDraftCommands | CommandSet{kBenchAccept}},
      {ranged("--suffix-cache-tokens", integers(0, SuffixOptions::kMaxCacheTokens), suffix.cache_tokens,
              "with --draft suffix or --suffix-draft: tokens of earlier requests (prompts and outputs) the shared "
              "index keeps, newest first (0: each sequence's own tokens only)"),
       kDraftCommands | CommandSet{kBenchAccept}},
      {flag("--suffix-draft",
            "with --draft DIR (a head, a draft model or mtp): the suffix index beside it; the index drafts where "
            "its match reaches --suffix-min-match, the head elsewhere (chains only)"),
       kDraftCommands},
      {ranged("--suffix-head-k", integers(0, kMaxDraftTokens), suffix.head_k,
              "with --suffix-draft: the head's K (0: --num-speculative-tokens, which also caps the index's)"),
       kDraftCommands},
      {text("--draft-layers", "LIST", kOptional,
            "target layers an EAGLE-3 head fuses, e.g. 2,16,29 (absent: its config)"),
       kDraftCommands},
      {one_of("--draft-weights", formats, kOptional,
              "the draft head's projections (absent: as --weights says; a GGUF target's weights are used as "
              "stored, so this is how its head is quantised)"),
       kDraftCommands},
      {flag("--draft-layer-ids-are-outputs",
            "the head's eagle_aux_hidden_state_layer_ids count layer outputs (SGLang): add 1"),
       kDraftCommands},
      {text("--num-speculative-tokens", "K", k,
            str_cat("with --draft: tokens drafted per target forward, K in 1..", kMaxDraftTokens,
                    "; auto: chosen per sequence and "
                    "step in 0..",
                    kAutoMaxK,
                    " from measured acceptance and cost (auto:N: 0..N; serve: the K "
                    "histogram is in /metrics); generate with the shipped head and no --draft: ",
                    kDefaultDraftK,
                    "; bench-spec and bench-engine: a comma-separated list, e.g. 1,2,4,auto, each run in turn")),
       {kGenerate, kServe, kBenchSpec, kBenchEngine}},
      {text("--num-speculative-tokens-per-batch-size", "LIST", kOptional,
            "with --draft: K by the number of decoding sequences, e.g. 1-4:3,5-16:2,17-:0 (0 = plain decoding)"),
       {kServe, kBenchEngine}},
      {one_of("--draft-proposal", {"sampled", "argmax"}, "sampled",
              "with a draft head at T > 0: drafts sampled from the head (rejection sampling) or its argmax "
              "(--draft ngram: always argmax)"),
       {kGenerate, kServe}},
      {ranged("--synthetic-acceptance", numbers(0, 1), kOptional,
              "with --draft: accept each draft with this probability, for speed and load tests only (the output "
              "is NOT the model's)"),
       kSpeculating},
      {ranged("--synthetic-depth-decay", numbers(0, 1), 1.0,
              "with synthetic acceptance (--synthetic-acceptance; bench-spec: --rates): the draft at depth d is "
              "accepted with rate * F^(d-1) (1: the same rate at every depth)"),
       kSpeculating | CommandSet{kBenchSpec}},
      {ranged("--synthetic-sibling-rate", numbers(0, 1), kDefaultSyntheticSiblingRate,
              "with synthetic acceptance and draft trees: a rank-2 or later child is accepted with this once its "
              "earlier siblings were rejected (the default is an assumption from Medusa's top-k accuracies, not a "
              "measured EAGLE head)"),
       kSpeculating | CommandSet{kBenchSpec}},
      {ranged("--spec-tree-top-k", integers(1, 16), kOptional,
              "with an EAGLE head on a Llama target: draft EAGLE-2 trees, expanding the top k candidates of the k "
              "best nodes per level (absent: chains of K)"),
       {kGenerate, kServe}},
      {ranged("--spec-tree-depth", integers(1, 16), 5, "with --spec-tree-top-k: the tree's levels (SGLang num_steps)"),
       {kGenerate, kServe}},
      {ranged("--spec-tree-tokens", integers(1, 64), 8,
              "with --spec-tree-top-k: nodes verified per round, the best by cumulative draft probability (SGLang "
              "num_draft_tokens)"),
       {kGenerate, kServe}},
      {one_of("--spec-tree-shape", {"learned", "confidence"}, "learned",
              "with draft trees: how greedy trees choose their nodes: learned (each sequence's measured acceptance "
              "by sibling rank, the nodes most likely reached) or confidence (EAGLE-2: the head's cumulative "
              "probability); sampled trees always take learned"),
       {kGenerate, kServe, kBenchAccept, kBenchSpec}},
      {one_of("--thinking-acceptance", {"strict", "relaxed"}, "strict",
              "with --draft: relaxed also accepts, inside <think> blocks, a draft among the target's "
              "--relaxed-top-k within --relaxed-delta nats of its best (lossy: serve says so in every chat "
              "response; bench-accept measures it as if every output token were thinking and reports the KL of "
              "the outputs to the target's distribution instead of requiring equality)"),
       {kServe, kBenchAccept}},
      {ranged("--relaxed-top-k", integers(1, kMiB), 10, "with --thinking-acceptance relaxed: the target's top N"),
       {kServe, kBenchAccept}},
      {ranged("--relaxed-delta", numbers(0, 100), 0.6,
              "with --thinking-acceptance relaxed: nats from the target's best"),
       {kServe, kBenchAccept}},
      {flag("--deterministic",
            "batch-invariant decoding: a request's tokens do not depend on what else is in the batch, on prompt "
            "chunking, on preemption or on speculation (greedy: the same ids alone or under load); every matmul "
            "takes the row-invariant kernels at any row count (prefill pays: docs/serving.md, \"Deterministic mode\"). "
            "A "
            "request can ask for it alone with the field \"deterministic\": true"),
       kSpeculating},
  };
}

// The rows of generation and sampling.
std::vector<OptionRow> generation_rows() {
  const EngineConfig engine;
  const GenerateOptions generation;
  const SamplingParams sampling;
  const Penalties penalties;
  return {
      {ranged("--max-tokens", integers(0, 16 * kMiB), generation.max_tokens,
              "tokens generated per request (generate, bench-engine) or per prompt (bench-accept)"),
       {kGenerate, kBenchEngine, kBenchAccept},
       {{kBenchEngine, 64}},
       {{kBenchEngine, integers(1, 16 * kMiB)}, {kBenchAccept, integers(2, 16 * kMiB)}}},
      {ranged("--max-length", integers(0, 16 * kMiB), engine.max_length,
              "context per sequence in positions, prompt + output (0: generate: prompt + max tokens; serve: the "
              "model's)"),
       {kGenerate, kServe}},
      {ranged("--temperature", numbers(0, 100), sampling.temperature, "0 = greedy"), {kGenerate}},
      {ranged("--top-k", integers(-1, int64_t{1} << 31), sampling.top_k, "keep the k most likely tokens (0 = off)"),
       {kGenerate}},
      {ranged("--top-p", numbers(0, 1, /*min_exclusive=*/true), sampling.top_p, "nucleus sampling mass (1 = off)"),
       {kGenerate}},
      {ranged("--min-p", numbers(0, 1), sampling.min_p, "drop tokens below min_p x the top probability (0 = off)"),
       {kGenerate}},
      {ranged("--seed", integers(INT64_MIN, INT64_MAX), int64_t(sampling.seed),
              "random seed (bench-accept: of prompt 0, prompt i using seed + i; bench-quality: of its seeded ids)"),
       {kGenerate, kBenchAccept, kBenchQuality},
       {{kBenchQuality, 1}}},
      {ranged("--presence-penalty", numbers(-2, 2), penalties.presence,
              "subtract this from the logit of every token already in the output (0 = off)"),
       {kGenerate}},
      {ranged("--frequency-penalty", numbers(-2, 2), penalties.frequency,
              "subtract this times a token's count in the output from its logit (0 = off)"),
       {kGenerate}},
      {ranged("--repetition-penalty", numbers(0, kMaxRepetitionPenalty, /*min_exclusive=*/true), penalties.repetition,
              "divide positive (multiply negative) logits of tokens in the prompt or output by this (1 = off; "
              "vLLM's and llama.cpp's repetition penalty)"),
       {kGenerate}},
      {flag("--ignore-eos", "do not stop at the model's end-of-sequence ids"), {kGenerate}},
      {flag("--show-prompt", "print the (rendered) prompt text before the output"), {kGenerate}},
      {flag("--show-special", "print special tokens (e.g. <|eot_id|>) in the streamed text"), {kGenerate}},
  };
}

// The rows of the engine.
std::vector<OptionRow> engine_rows() {
  const EngineConfig engine;
  return {
      {ranged("--max-num-seqs", integers(1, 65536), engine.max_num_seqs, "sequences decoded together"), {kServe}},
      {ranged("--max-batch-tokens", integers(1, kMiB), engine.max_batch_tokens, "rows per engine step"),
       {kServe, kBenchEngine}},
      {ranged("--max-prefill-rows-while-decoding", integers(0, kMiB), engine.max_prefill_rows_while_decoding,
              "prompt rows in a step that also decodes: bounds running requests' inter-token latency (0: no cap)"),
       {kServe, kBenchEngine}},
      {ranged("--kv-cache-memory", integers(0, kTiB * 64), engine.kv_cache_memory,
              "KV cache bytes (serve, 0: --max-num-seqs x --max-length, at most half free memory)"),
       {kServe, kBenchEngine},
       {{kBenchEngine, int64_t{4} << 30}},
       {{kBenchEngine, integers(1, kTiB * 64)}}},
      {text("--kv-cache-dir", "DIR", kOptional,
            "a second prefix-cache tier on disk: full KV blocks are written to DIR, read back instead of "
            "recomputed, and found again after a restart (absent: the prefix cache lives in RAM only)"),
       {kServe, kBenchEngine}},
      {ranged("--kv-cache-disk-bytes", integers(1, kTiB * 64), 16 * kGiB,
              "with --kv-cache-dir: bytes of block files kept there for this model and KV settings (least "
              "recently used removed first)"),
       {kServe, kBenchEngine}},
      {flag("--prefix-ttft",
            "instead of the load runs: time to first token of one --prompt-tokens prompt computed cold, from the "
            "RAM prefix cache and from the --kv-cache-dir disk tier (in the page cache, and read from the device)"),
       {kBenchEngine}},
  };
}

// The rows of the server.
std::vector<OptionRow> server_rows() {
  const server::ServerOptions server;
  const HttpLimits http;
  return {
      {text("--host", "ADDRESS", server.host, "address to listen on"), {kServe}},
      {ranged("--port", integers(0, 65535), server.port, "port (0 = any free port, printed at start)"), {kServe}},
      {text("--api-key", "KEY", kOptional, "require 'Authorization: Bearer KEY' on /v1/*, /tokenize and /detokenize"),
       {kServe}},
      {text("--served-model-name", "NAME", kOptional, "the model name clients use (absent: the --model argument)"),
       {kServe}},
      {text("--allowed-origins", "LIST", kOptional,
            "browser origins allowed cross-origin requests: comma-separated scheme://host[:port], or * (absent: none)"),
       {kServe}},
      {flag("--allow-credentials", "CORS responses allow credentials (cookies, Authorization); needs --allowed-origins"),
       {kServe}},
      {one_of("--scheduling-policy", {"fcfs", "priority"}, "fcfs",
              "priority: requests' priority field (lower first) orders admission and preemption; fcfs refuses it"),
       {kServe}},
      {ranged("--max-queue", integers(1, kMiB), server.max_in_flight, "engine requests queued or running before 429"),
       {kServe}},
      {one_of("--tool-parser", {"deepseek_v3", "deepseek_v31", "llama3_json"}, kOptional,
              "how tool calls are read from the output (absent: detected from the checkpoint)"),
       {kServe}},
      {one_of("--reasoning-parser", {"auto", "none", "deepseek_r1", "deepseek_v3", "qwen3"}, "auto",
              "chat <think> blocks become reasoning_content (auto: when the chat template writes </think>)"),
       {kServe}},
      {ranged("--responses-store-max", integers(0, kMiB), server.responses_store.max_responses,
              "stored /v1/responses kept for previous_response_id and GET (least recently used out; 0: none)"),
       {kServe}},
      {ranged("--responses-store-bytes", integers(1, kTiB), server.responses_store.max_bytes,
              "bytes of stored /v1/responses (their JSON text; least recently used out)"),
       {kServe}},
      {ranged("--http-threads", integers(1, 1024), server.http_threads,
              "HTTP connection workers (a streaming response holds one)"),
       {kServe}},
      {ranged("--max-request-bytes", integers(1, kTiB), http.max_body_bytes,
              "largest request body (larger: 413, before it is read)"),
       {kServe}},
      {text("--limit", "LIST", kOptional,
            "GROUP.FIELD=VALUE,...: raise or lower any limit on requests (the list: --help)"),
       {kServe}},
      {ranged("--max-header-bytes", integers(1, kTiB), http.max_header_bytes,
              "largest request line plus headers (larger: 431)"),
       {kServe}},
      {ranged("--header-timeout", integers(1, 86400), http.header_deadline_s,
              "seconds a request's line and headers may take to arrive (then 408)"),
       {kServe}},
      {ranged("--body-timeout", integers(1, 86400), http.body_deadline_s,
              "seconds a request's body may take to arrive after its headers (then 408)"),
       {kServe}},
      {ranged("--keep-alive-timeout", integers(1, 86400), http.keep_alive_idle_s,
              "seconds an idle keep-alive connection stays open"),
       {kServe}},
      {ranged("--drain-timeout", integers(0, 86400), 30, "seconds running requests may take to finish on SIGTERM"),
       {kServe}},
  };
}

// The rows of the benches and the reference tools, then --json and --help.
std::vector<OptionRow> bench_rows() {
  return {
      {text("--thread-counts", "LIST", kOptional, "comma-separated thread counts to run (absent: 1 and --threads)"),
       {kBench}},
      {ranged("--prompt-tokens", integers(1, 16 * kMiB), 128,
              "prompt length (bench: prefill timed; bench-spec: context of the measured steps; bench-quality: the "
              "seeded pseudo-random sequence)"),
       {kBench, kBenchSpec, kBenchEngine, kBenchQuality},
       {{kBench, 512}}},
      {ranged("--prefill-repeats", integers(1, 1000000), 3, "prefills timed; median and best reported"), {kBench}},
      {ranged("--decode-tokens", integers(1, 16 * kMiB), 64,
              "decode steps timed, median and best reported (bench); tokens generated per end-to-end run "
              "(bench-spec)"),
       {kBench, kBenchSpec},
       {{kBench, 32}}},
      {ranged("--context-tokens", integer_list(1, 16 * kMiB), kOptional,
              "contexts to time decode and the k-token forwards at, each filled once with random KV rows (no "
              "prefill timed per repeat); one result per context (absent: the prompt's, after its prefill)"),
       {kBench}},
      {text("--k", "LIST", "1,2,4,8,16", "token counts of the k-token forwards"), {kBench}},
      {text("--k", "LIST", "1,2,3,4,5,6",
            str_cat("numbers of speculative tokens to measure; auto or auto:N: chosen per step in 0..", kAutoMaxK,
                    " (0..N) from measured acceptance and cost")),
       {kBenchAccept}},
      {ranged("--repeats", integers(1, 1000000), 7,
              "repetitions of each step (bench: of each k-token forward); the median is reported"),
       {kBench, kBenchSpec},
       {{kBench, 5}}},
      {ranged("--bandwidth-bytes", integers(0, kTiB), int64_t{256} << 20,
              "buffer the bandwidth probe reads before each timed decode step"),
       {kBench}},
      {text("--rates", "LIST", "0.5,0.7,0.9", "synthetic acceptance rates, comma-separated, each in [0, 1]"),
       {kBenchSpec}},
      {text("--concurrency", "LIST", "1,4,16,64", "comma-separated concurrent requests"), {kBenchEngine}},
      {text("--json-schema", "FILE", kOptional,
            "also run each configuration with every request held to this JSON schema, and time its masks"),
       {kBenchEngine}},
      {ranged("--requests", integers(1, kMiB), kOptional, "requests per level (absent: 2 x concurrency, at least 4)"),
       {kBenchEngine}},
      {ranged("--random-range-ratio", numbers(0, 0.999999), 0.0,
              "R in [0, 1): each request's prompt and max tokens drawn from [L (1 - R), L (1 + R)], the same in "
              "every run"),
       {kBenchEngine}},
      {text("--prompts", "FILE", kOptional,
            "JSON list of prompts: strings or {\"text\", \"source\"} objects (absent: the held-out set "
            "tests/data/trained/prompts.json)"),
       {kBenchAccept}},
      {ranged("--max-prompts", integers(0, kMiB), 0, "use the first N prompts only (0: all)"), {kBenchAccept}},
      {text("--trees", "LIST", kOptional,
            "EAGLE-2 draft trees to measure beside the chains, TOP_K:DEPTH:TOKENS comma-separated (e.g. 2:4:4: as "
            "wide a verification as K = 4); greedy requests only, T > 0 rows draft chains of K = 3; "
            "auto:TOP_K:DEPTH:TOKENS "
            "lets auto choose between that tree and chains each round"),
       {kBenchAccept}},
      {text("--trees", "LIST", kOptional,
            "EAGLE-2 draft trees to run beside the chains, TOP_K:DEPTH:TOKENS comma-separated (e.g. 2:4:8), each "
            "with its step costs and its speedup at every rate"),
       {kBenchSpec}},
      {text("--temperatures", "LIST", "0,1", "temperatures (T > 0 is lossless rejection sampling)"), {kBenchAccept}},
      {ranged("--chunk", integers(1, kMiB), 16, "rows per forward of the scored runs (16: the decode/verify kernels)"),
       {kBenchQuality}},
      {ranged("--ctx", integers(1, 16 * kMiB), kOptional,
              "score the ids in chunks of this many, each from an empty cache and its first token made BOS when "
              "the tokenizer adds one, counting only each chunk's second half (llama-perplexity's rule, for "
              "figures beside its --kl-divergence); absent: one chunk, every position counted"),
       {kBenchQuality}},
      {text("--reference", "PATH", kOptional,
            "score --model as stored against this model as stored (e.g. the BF16 GGUF or folder a quantised GGUF "
            "was made from) instead of against a --weights copy of itself"),
       {kBenchQuality}},
      {text("--out", "FILE", kOptional, "output .npy for the logits, float32 [n, n_vocab]"), {kLogits}},
      {text("--hidden-layers", "LIST", kOptional, "comma-separated layers (0..n_layer, or final_norm) to dump"),
       {kLogits}},
      {text("--hidden-out", "PREFIX", kOptional, "prefix of the hidden-state files: PREFIX<layer>.npy"), {kLogits}},

      {flag("--json", "print the results as JSON instead of text"),
       {kGenerate, kTokenize, kBench, kBenchSpec, kBenchEngine, kBenchAccept}},
      {flag("--help", "this text"), kEveryCommand},
  };
}

std::vector<OptionRow> build_table() {
  std::vector<OptionRow> table;
  for (auto rows : {model_rows, prompt_rows, draft_rows, generation_rows, engine_rows, server_rows, bench_rows})
    for (OptionRow& row : rows()) table.push_back(std::move(row));
  return table;
}

}  // namespace

const char* command_name(Command command) {
  switch (command) {
    case kGenerate: return "generate";
    case kServe: return "serve";
    case kLogits: return "logits";
    case kTokenize: return "tokenize";
    case kBench: return "bench";
    case kBenchSpec: return "bench-spec";
    case kBenchEngine: return "bench-engine";
    case kBenchAccept: return "bench-accept";
    case kBenchQuality: return "bench-quality";
  }
  return "?";
}

const std::vector<OptionRow>& option_table() {
  static const std::vector<OptionRow> table = build_table();
  return table;
}

std::vector<OptionSpec> options_for(Command command) {
  std::vector<OptionSpec> specs;
  for (const OptionRow& row : option_table()) {
    if (!row.commands.has(command)) continue;
    OptionSpec spec = row.spec;
    for (const auto& [c, fallback] : row.command_defaults)
      if (c == command) spec.fallback = fallback;
    for (const auto& [c, range] : row.command_ranges)
      if (c == command) spec.range = range;
    specs.push_back(std::move(spec));
  }
  return specs;
}

Args parse_options(Command command, const std::vector<std::string>& argv) { return Args(argv, options_for(command)); }

std::string command_usage(Command command) { return usage(command_name(command), options_for(command)); }

}  // namespace aerie::cli
