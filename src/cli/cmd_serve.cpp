// aerie serve: an OpenAI-compatible HTTP server over the continuous-batching engine.
//
// The listener starts first (GET /health answers 503 while the weights load), then the model, the draft
// head and the engine; SIGTERM or SIGINT drains (new requests get 503, running ones may finish within
// --drain-timeout, the rest are cancelled) and the process exits 0.
#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <new>
#include <optional>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "cli/common.h"
#include "cli/draft.h"
#include "cli/prompt.h"
#include "cli/speculative_tokens.h"
#include "core/error.h"
#include "core/limits.h"
#include "engine/engine.h"
#include "server/http_server.h"
#include "server/tool_parser.h"

namespace aerie::cli {
namespace {

std::vector<OptionSpec> serve_options() {
  std::vector<OptionSpec> specs = model_options();
  describe_weight_memory_default(specs, WeightMemory::kAuto);  // a server loads once and decodes for hours
  const std::vector<OptionSpec> draft = draft_options();
  specs.insert(specs.end(), draft.begin(), draft.end());
  const std::vector<OptionSpec> own = {
      {"--num-speculative-tokens", true, "with --draft: tokens drafted per target forward, K (default 3); auto: "
                                         "chosen per sequence and step in 0..8 from measured acceptance and cost "
                                         "(auto:N: 0..N; the K histogram is in /metrics)"},
      {"--synthetic-acceptance", true, "with --draft: accept each draft with this probability, for load tests at a "
                                       "chosen acceptance rate (the responses are NOT the model's output)", numbers(0, 1)},
      {"--draft-proposal", true, "with a draft head at T > 0: sampled (default; rejection sampling) or argmax "
                                 "(--draft ngram: always argmax)"},
      {"--num-speculative-tokens-per-batch-size", true,
       "with --draft: K by the number of decoding sequences, e.g. 1-4:3,5-16:2,17-:0 (0 = plain decoding)"},
      {"--host", true, "address to listen on (default 127.0.0.1)"},
      {"--port", true, "port (default 8000; 0 = any free port, printed at start)", integers(0, 65535)},
      {"--api-key", true, "require 'Authorization: Bearer KEY' on /v1/*, /tokenize and /detokenize"},
      {"--served-model-name", true, "the model name clients use (default: the --model argument)"},
      {"--max-num-seqs", true, "sequences decoded together (default 16)", integers(1, 65536)},
      {"--max-batch-tokens", true, "rows per engine step (default 512)", integers(1, kMiB)},
      {"--max-prefill-rows-while-decoding", true,
       "prompt rows in a step that also decodes: bounds running requests' inter-token latency (default 256; 0: no cap)", integers(0, kMiB)},
      {"--kv-cache-memory", true, "KV cache bytes (default: --max-num-seqs x --max-length, at most half free memory)", integers(0, kTiB * 64)},
      {"--max-length", true, "context per sequence, prompt + output (default: the model's)", integers(0, 16 * kMiB)},
      {"--max-queue", true, "engine requests queued or running before 429 (default 256)", integers(1, kMiB)},
      {"--tool-parser", true, "deepseek_v3 | deepseek_v31 | llama3_json (default: detected from the checkpoint)"},
      {"--thinking-acceptance", true, "with --draft: strict (default) or relaxed: inside <think> blocks also accept a "
                                      "draft among the target's --relaxed-top-k within --relaxed-delta nats of its best "
                                      "(lossy; every chat response says so)"},
      {"--relaxed-top-k", true, "with --thinking-acceptance relaxed: default 10", integers(1, kMiB)},
      {"--relaxed-delta", true, "with --thinking-acceptance relaxed: default 0.6", numbers(0, 100)},
      {"--reasoning-parser", true, "auto | none | deepseek_r1 | deepseek_v3 | qwen3: chat <think> blocks become "
                                   "reasoning_content (default auto: when the chat template writes </think>)"},
      {"--tokenizer", true, "folder with tokenizer.json (default: the model folder)"},
      {"--chat-template", true, "a Jinja chat template file instead of tokenizer_config.json's"},
      {"--http-threads", true, "HTTP connection workers (default 128; a streaming response holds one)", integers(1, 1024)},
      {"--max-request-bytes", true, "largest request body (default 8 MiB; larger: 413, before it is read)", integers(1, kTiB)},
      {"--limit", true, "GROUP.FIELD=VALUE,...: raise or lower any limit on requests (the list: --help)"},
      {"--max-header-bytes", true, "largest request line plus headers (default 64 KiB; larger: 431)", integers(1, kTiB)},
      {"--header-timeout", true, "seconds a request's line and headers may take to arrive (default 10; then 408)", integers(1, 86400)},
      {"--body-timeout", true, "seconds a request's body may take to arrive after its headers (default 60; then 408)", integers(1, 86400)},
      {"--keep-alive-timeout", true, "seconds an idle keep-alive connection stays open (default 5)", integers(1, 86400)},
      {"--drain-timeout", true, "seconds running requests may take to finish on SIGTERM (default 30)", integers(0, 86400)},
      {"--help", false, "this text"},
  };
  specs.insert(specs.end(), own.begin(), own.end());
  const std::vector<OptionSpec> tree = tree_option_specs();
  specs.insert(specs.end(), tree.begin(), tree.end());
  specs.push_back(deterministic_option());
  return specs;
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  AERIE_CHECK(in.good(), "cannot open ", path.string());
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// --reasoning-parser: auto (the chat template decides), none, or a named parser.
std::optional<server::ReasoningParserKind> reasoning_parser_for(const Args& args, const std::string& chat_template) {
  const std::string name = args.str("--reasoning-parser", "auto");
  return name == "auto" ? server::detect_reasoning_parser(chat_template) : server::parse_reasoning_parser(name);
}

std::optional<server::ToolParserKind> tool_parser_for(const Args& args, const std::filesystem::path& model_dir,
                                                      const Tokenizer& tokenizer) {
  if (args.has("--tool-parser")) return server::tool_parser_kind_from_name(args.str("--tool-parser"));
  nlohmann::json tokenizer_config, model_config;
  try {
    if (!tokenizer.config().raw_json.empty()) tokenizer_config = nlohmann::json::parse(tokenizer.config().raw_json);
    if (std::filesystem::exists(model_dir / "config.json"))
      model_config = nlohmann::json::parse(read_file(model_dir / "config.json"));
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;  // the loaders report broken files; detection just finds nothing
  }
  return server::detect_tool_parser(tokenizer_config, model_config);
}

// --max-request-bytes, --max-header-bytes and the request deadlines (their ranges are in serve_options());
// HttpLimits' defaults when absent.
void read_http_limits(const Args& args, HttpLimits& limits) {
  limits.max_body_bytes = size_t(args.integer("--max-request-bytes", int64_t(limits.max_body_bytes)));
  limits.max_header_bytes = size_t(args.integer("--max-header-bytes", int64_t(limits.max_header_bytes)));
  limits.header_deadline_s = int(args.integer("--header-timeout", limits.header_deadline_s));
  limits.body_deadline_s = int(args.integer("--body-timeout", limits.body_deadline_s));
  limits.keep_alive_idle_s = int(args.integer("--keep-alive-timeout", limits.keep_alive_idle_s));
}

// SIGINT/SIGTERM are blocked in every thread and taken here by sigwait: before the model is ready the
// process just exits; after, the main thread is woken to drain.
struct SignalWaiter {
  std::mutex mutex;
  std::condition_variable cv;
  int signal = 0;
  std::atomic<bool> ready{false};
};

}  // namespace

int run_serve(const std::vector<std::string>& argv) {
  const std::vector<OptionSpec> specs = serve_options();
  const Args args(argv, specs);
  if (args.has("--help")) {
    std::fputs(usage("serve", specs).c_str(), stdout);
    std::printf("\nlimits on each request (--limit NAME=VALUE), with their defaults:\n%s",
                describe_limits(RequestSideLimits{}).c_str());
    return 0;
  }
  const std::string model_arg = args.required("--model");
  const std::filesystem::path model_dir = model_arg;
  const bool quiet = args.has("--quiet");
  reasoning_parser_for(args, "");  // a bad --reasoning-parser fails before the weights load

  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);  // before any thread starts: they inherit the mask
  ::signal(SIGPIPE, SIG_IGN);
  // Tensor parallel: rank 0 serves; the others hold their shards and repeat its forwards until it stops
  // them, with SIGINT/SIGTERM left blocked (mpirun passes a signal to every rank; rank 0 drains first).
  const std::unique_ptr<dist::Communicator> ranks = tensor_parallel_ranks(args);
  if (ranks->rank() != 0) {
    return follow_tensor_parallel(model_dir, *ranks, args, weight_choice(args, WeightMemory::kAuto));
  }
  auto waiter = std::make_shared<SignalWaiter>();
  std::thread([waiter, signals] {
    int sig = 0;
    sigwait(&signals, &sig);
    if (!waiter->ready.load()) {
      std::fprintf(stderr, "aerie serve: signal %d while loading: exiting\n", sig);
      std::_Exit(0);
    }
    std::lock_guard<std::mutex> lock(waiter->mutex);
    waiter->signal = sig;
    waiter->cv.notify_all();
  }).detach();

  server::ServerOptions options;
  options.host = args.str("--host", "127.0.0.1");
  options.port = int(args.integer("--port", 8000));
  options.api_key = args.str("--api-key");
  options.served_model_name = args.str("--served-model-name", model_arg);
  options.http_threads = int(args.integer("--http-threads", 128));
  options.max_in_flight = args.integer("--max-queue", 256);
  RequestSideLimits limits;
  if (args.has("--limit")) {
    const std::string list = args.str("--limit");
    for (size_t begin = 0; begin <= list.size();) {
      const size_t end = std::min(list.find(',', begin), list.size());
      set_limit(limits, std::string_view(list).substr(begin, end - begin));
      begin = end + 1;
    }
  }
  read_http_limits(args, limits.http);  // the specific flags win over --limit http.*
  options.limits = limits.http;
  options.json_limits = limits.json;
  options.request_limits = limits.request;
  options.schema_limits = limits.schema;
  options.template_limits = limits.chat_template;
  server::HttpServer http(options);
  const int port = http.bind();
  http.start();
  std::fprintf(stderr, "aerie serve: listening on http://%s:%d (loading %s)\n", options.host.c_str(), port,
               model_arg.c_str());

  const std::unique_ptr<Tokenizer> tokenizer = load_tokenizer_for(args, model_dir, /*required=*/true);
  apply_bf16_activations(args);
  const KvDType kv_dtype = kv_cache_dtype(args);  // a bad value fails before the weights load
  ThreadPool pool(thread_count(args));
  // Tensor parallel: a rank that dies or hangs fails the engine step (clients get 503) instead of ending
  // the job at once; the wait below then ends it with a non-zero status, for a supervisor to restart.
  ranks->set_throw_on_failure(true);
  EngineTarget loaded = load_engine_target(model_dir, pool, quiet, weight_choice(args, WeightMemory::kAuto), *ranks);
  TensorParallelDriver* const driver = loaded.driver.get();  // rank 0 of a tensor-parallel run: drives the others
  Model* const model = &loaded.model();
  const std::unique_ptr<Drafter> head = load_draft_verbose(args, *model, pool, quiet);

  EngineConfig config;
  config.max_num_seqs = args.integer("--max-num-seqs", 16);
  config.max_batch_tokens = args.integer("--max-batch-tokens", 512);
  config.max_prefill_rows_while_decoding = args.integer("--max-prefill-rows-while-decoding", 256);
  config.kv_cache_memory = uint64_t(args.integer("--kv-cache-memory", 0));
  config.kv_cache_dtype = kv_dtype;
  config.max_length = args.integer("--max-length", 0);
  config.deterministic = args.has("--deterministic");
  config.max_queue = options.max_in_flight + 1;  // the server's bound answers first (429)
  if (head) {
    apply_num_speculative_tokens(args, 3, config.spec);
    apply_tree_options(args, config.spec);
    config.spec.proposal = draft_proposal(args, *head);
    if (args.has("--num-speculative-tokens-per-batch-size"))
      config.k_by_batch_size = DraftTokensByBatchSize::parse(args.str("--num-speculative-tokens-per-batch-size"));
    if (args.has("--synthetic-acceptance")) {
      config.spec.synthetic_acceptance = args.number("--synthetic-acceptance", -1.0);
      std::fprintf(stderr, "aerie serve: synthetic acceptance %.2f: responses are NOT the model's output (load tests "
                           "only)\n", config.spec.synthetic_acceptance);
    }
  } else {
    for (const char* name : {"--num-speculative-tokens", "--draft-proposal", "--num-speculative-tokens-per-batch-size",
                             "--synthetic-acceptance", "--spec-tree-top-k", "--spec-tree-depth", "--spec-tree-tokens"})
      AERIE_CHECK(!args.has(name), name, " needs --draft");
  }
  // Relaxed thinking acceptance needs the tokens that open and close a <think> block as single tokens.
  const std::string thinking = args.str("--thinking-acceptance", "strict");
  AERIE_CHECK(thinking == "strict" || thinking == "relaxed", "--thinking-acceptance must be strict or relaxed");
  AERIE_CHECK(thinking == "strict" || head, "--thinking-acceptance relaxed needs --draft");
  if (thinking == "relaxed") {
    config.spec.relaxed_thinking = RelaxedAcceptance{args.integer("--relaxed-top-k", 10), args.number("--relaxed-delta", 0.6)};
    for (const auto& [marker, id] : {std::pair<const char*, int64_t*>{"<think>", &config.spec.think_begin_token},
                                     {"</think>", &config.spec.think_end_token}}) {
      const std::vector<int32_t> ids = tokenizer->encode(marker, false);
      AERIE_CHECK(ids.size() == 1, "--thinking-acceptance relaxed: '", marker, "' is not one token of this tokenizer");
      *id = ids[0];
    }
    std::fprintf(stderr, "aerie serve: relaxed thinking acceptance (top %lld, %.2f nats): output inside <think> is "
                         "not exactly the model's\n", (long long)config.spec.relaxed_thinking->top_k,
                 config.spec.relaxed_thinking->delta);
  }
  std::optional<Engine> engine_storage;
  try {
    engine_storage.emplace(*model, head.get(), config, pool);
  } catch (const std::bad_alloc&) {  // the KV cache, sized by the flag (or by free memory without it)
    throw Error(str_cat("cannot allocate the KV cache of --kv-cache-memory ",
                        config.kv_cache_memory > 0 ? std::to_string(config.kv_cache_memory) + " bytes" : "(default)",
                        ": out of memory"));
  }
  Engine& engine = *engine_storage;

  server::ServedModel served;
  served.engine = &engine;
  if (driver) served.on_idle = [driver] { driver->heartbeat(); };
  served.tokenizer = tokenizer.get();
  served.eos_ids = stop_token_ids(model_dir, model->eos_token_ids());
  served.synthetic_acceptance = head ? config.spec.synthetic_acceptance : -1.0;
  served.tool_parser = tool_parser_for(args, model_dir, *tokenizer);
  served.chat_template = args.has("--chat-template") ? read_file(args.str("--chat-template"))
                                                     : tokenizer->config().chat_template;
  served.n_vocab = model->n_vocab();
  served.reasoning_parser = reasoning_parser_for(args, served.chat_template);
  served.relaxed_thinking = config.spec.relaxed_thinking;
  http.attach(served);
  waiter->ready.store(true);
  std::fprintf(stderr,
               "aerie serve: ready: model '%s', context %lld, %s, tool parser %s, reasoning parser %s, %d threads\n",
               options.served_model_name.c_str(), (long long)engine.max_length(), engine.memory_plan().summary.c_str(),
               served.tool_parser ? std::string(server::tool_parser_name(*served.tool_parser)).c_str() : "none",
               served.reasoning_parser ? "<think>" : "none", pool.n_threads());

  int sig = 0;
  {
    std::unique_lock<std::mutex> lock(waiter->mutex);
    while (!waiter->cv.wait_for(lock, std::chrono::seconds(1), [&] { return waiter->signal != 0; })) {
      if (!driver) continue;
      const std::string failure = http.engine_failure();
      if (failure.empty()) continue;
      // Tensor parallel: a rank died or hangs, and the ranks cannot get back in step. Requests in flight
      // have been answered (their choices cancelled: 503); end the whole job with a failing status.
      lock.unlock();
      std::fprintf(stderr, "aerie serve: %s: the tensor-parallel ranks are out of step; exiting\n", failure.c_str());
      http.shutdown(std::chrono::seconds(2));
      ranks->abort(1);
    }
    sig = waiter->signal;
  }
  const int64_t drain_s = args.integer("--drain-timeout", 30);
  std::fprintf(stderr, "aerie serve: %s: draining (%lld requests in flight, up to %lld s)\n",
               sig == SIGTERM ? "SIGTERM" : "SIGINT", (long long)http.in_flight(), (long long)drain_s);
  http.shutdown(std::chrono::seconds(drain_s));
  if (driver && !http.engine_failure().empty()) {
    // A rank died (mpirun's SIGTERM after a rank's death lands here): returning would leave the job in
    // MPI_Finalize, waiting on the dead rank until mpirun's SIGKILL. End it now, with a failing status.
    std::fprintf(stderr, "aerie serve: %s: the tensor-parallel ranks are out of step; exiting\n",
                 http.engine_failure().c_str());
    ranks->abort(1);
  }
  std::fprintf(stderr, "aerie serve: stopped\n");
  return 0;
}

}  // namespace aerie::cli
