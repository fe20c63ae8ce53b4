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
#include "cli/configs.h"
#include "cli/draft.h"
#include "cli/options.h"
#include "cli/prompt.h"
#include "cli/speculative_tokens.h"
#include "core/error.h"
#include "core/limits.h"
#include "engine/engine.h"
#include "server/http_server.h"
#include "server/tool_parser.h"

namespace aerie::cli {
namespace {

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  AERIE_CHECK(in.good(), "cannot open ", path.string());
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// --reasoning-parser: auto (the chat template decides), none, or a named parser.
std::optional<server::ReasoningParserKind> reasoning_parser_for(const Args& args, const std::string& chat_template) {
  const std::string name = args.str("--reasoning-parser");
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
  const Args args = parse_options(Command::kServe, argv);
  if (args.has("--help")) {
    std::fputs(command_usage(Command::kServe).c_str(), stdout);
    std::printf("\nlimits on each request (--limit NAME=VALUE), with their defaults:\n%s",
                describe_limits(RequestSideLimits{}).c_str());
    return 0;
  }
  const std::string model_arg = args.required("--model");
  const std::filesystem::path model_dir = model_arg;
  const bool quiet = args.has("--quiet");
  reasoning_parser_for(args, "");  // a bad --reasoning-parser fails before the weights load
  check_kv_disk_flags(args);       // and an unusable --kv-cache-dir

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
    return follow_tensor_parallel(model_dir, *ranks, args, weight_choice(args));
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

  const server::ServerOptions options = server_options(args);
  server::HttpServer http(options);
  const int port = http.bind();
  http.start();
  std::fprintf(stderr, "aerie serve: listening on http://%s:%d (loading %s)\n", options.host.c_str(), port,
               model_arg.c_str());

  const std::unique_ptr<Tokenizer> tokenizer = load_tokenizer_for(args, model_dir, /*required=*/true);
  apply_bf16_activations(args);
  ThreadPool pool(thread_count(args));
  // Tensor parallel: a rank that dies or hangs fails the engine step (clients get 503) instead of ending
  // the job at once; the wait below then ends it with a non-zero status, for a supervisor to restart.
  ranks->set_throw_on_failure(true);
  EngineTarget loaded = load_engine_target(model_dir, pool, quiet, weight_choice(args), *ranks);
  TensorParallelDriver* const driver = loaded.driver.get();  // rank 0 of a tensor-parallel run: drives the others
  Model* const model = &loaded.model();
  const std::unique_ptr<Drafter> head = load_draft_verbose(args, *model, pool, quiet);

  EngineConfig config = engine_config(args);
  config.spec = spec_options(args, head.get());
  config.kv_disk = kv_disk_options(args, model_dir);
  config.adapters = lora_adapters(args, *model, quiet);
  if (config.spec.synthetic_acceptance >= 0.0)
    std::fprintf(stderr,
                 "aerie serve: synthetic acceptance %.2f: responses are NOT the model's output (load tests "
                 "only)\n",
                 config.spec.synthetic_acceptance);
  // Relaxed thinking acceptance needs the tokens that open and close a <think> block as single tokens.
  config.spec.relaxed_thinking = relaxed_acceptance(args);
  AERIE_CHECK(!config.spec.relaxed_thinking || head, "--thinking-acceptance relaxed needs --draft");
  if (config.spec.relaxed_thinking) {
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
  served.priority_scheduling = args.str("--scheduling-policy") == "priority";
  if (config.adapters)
    for (const LoraAdapter& a : config.adapters->adapters) served.lora_modules.push_back({a.name, a.dir});
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
  const int64_t drain_s = args.integer("--drain-timeout");
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
