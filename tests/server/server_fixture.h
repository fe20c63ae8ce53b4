// A real `aerie serve` HTTP server in-process on a loopback port: the small Llama checkpoint
// tests/data/llama/bf16_gqa_rope_scaled_tied, a byte-level BPE tokenizer.json covering all 256 model ids
// and a Llama-3-shaped chat template (written by the test into a temporary folder), the continuous-batching
// engine, and helpers that drive it with cpp-httplib's client.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <functional>
#include <string>
#include <vector>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "core/thread_pool.h"
#include "../engine/fault_injection.h"
#include "engine/engine.h"
#include "models/registry.h"
#include "server/http_server.h"
#include "spec/drafter_registry.h"
#include "tokenizer/tokenizer.h"

namespace aerie::server::testing {

namespace fs = std::filesystem;
using Json = nlohmann::json;

inline const fs::path kData(AERIE_TEST_DATA_DIR);

// The byte-level alphabet's character for printable ASCII is the byte itself, except space and newline.
inline std::string byte_char(unsigned char b) {
  if (b == ' ') return "\xC4\xA0";
  if (b == '\n') return "\xC4\x8A";
  return std::string(1, char(b));
}

// Ids 1-4 and 7: special tokens; 5-6, 8-...: printable ASCII, newline, a few merges, then two-letter
// tokens up to id 255 so that every id the random model can produce decodes to text. `think`: ids 254 and
// 255 are instead "<think>" and "</think>", added tokens that are not special (as in DeepSeek-R1 and Qwen3).
inline constexpr int kThinkOpenId = 254, kThinkCloseId = 255;
inline Json tokenizer_json(bool think = false) {
  Json vocab = Json::object();
  int id = 8;
  vocab["!"] = 5;
  vocab["\""] = 6;
  for (int b = 0x23; b < 0x7f; ++b) vocab[byte_char((unsigned char)b)] = id++;
  vocab[byte_char('\n')] = id++;
  vocab[byte_char(' ')] = id++;
  const std::vector<std::string> merged = {"he", "ll", "hell", "hello", "\xC4\xA0t", "\xC4\xA0th"};
  for (const std::string& m : merged) vocab[m] = id++;
  const Json merges = {"h e", "l l", "he ll", "hell o", "\xC4\xA0 t", "\xC4\xA0t h"};
  const int n_text = think ? kThinkOpenId : 256;
  for (char a = 'a'; id < n_text; ++a)
    for (char b = 'a'; b <= 'z' && id < n_text; ++b) {
      const std::string pair = std::string(1, a) + std::string(1, b) + "\xC4\xA0";  // "ab " style words
      if (!vocab.contains(pair)) vocab[pair] = id++;
    }
  auto special = [](int i, const char* s) {
    return Json{{"id", i}, {"content", s}, {"special", true}, {"normalized", false}, {"lstrip", false},
                {"rstrip", false}, {"single_word", false}};
  };
  Json added = {special(1, "<|begin_of_text|>"), special(2, "<|eot_id|>"), special(3, "<|start_header_id|>"),
                special(4, "<|end_header_id|>"), special(7, "<|python_tag|>")};
  if (think) {
    for (const auto& [i, s] : {std::pair{kThinkOpenId, "<think>"}, std::pair{kThinkCloseId, "</think>"}}) {
      Json token = special(i, s);
      token["special"] = false;
      added.push_back(token);
    }
  }
  return {
      {"version", "1.0"},
      {"added_tokens", added},
      {"normalizer", nullptr},
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
      {"post_processor",
       {{"type", "TemplateProcessing"},
        {"single",
         {{{"SpecialToken", {{"id", "<|begin_of_text|>"}, {"type_id", 0}}}},
          {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
        {"special_tokens",
         {{"<|begin_of_text|>", {{"id", "<|begin_of_text|>"}, {"ids", {1}}, {"tokens", {"<|begin_of_text|>"}}}}}}}},
      {"decoder", {{"type", "ByteLevel"}}},
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}}},
  };
}

// Llama-3-shaped: optional tools list, messages, generation prompt.
inline constexpr const char* kTemplate =
    "{{ bos_token }}{% if tools %}<|start_header_id|>system<|end_header_id|>\n\nTools: {{ tools | tojson }}<|eot_id|>"
    "{% endif %}{% for m in messages %}<|start_header_id|>{{ m['role'] }}<|end_header_id|>\n\n"
    "{{ m['content'] | trim }}<|eot_id|>{% endfor %}"
    "{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}";

// A reasoning model's template: the generation prompt opens the <think> block (DeepSeek-R1's newer
// templates do), so the output is the reasoning, "</think>", then the answer; chat_template_kwargs
// {"enable_thinking": false} closes an empty block instead (Qwen3's way), so the output is the answer.
inline constexpr const char* kThinkTemplate =
    "{{ bos_token }}{% if tools %}<|start_header_id|>system<|end_header_id|>\n\nTools: {{ tools | tojson }}<|eot_id|>"
    "{% endif %}{% for m in messages %}<|start_header_id|>{{ m['role'] }}<|end_header_id|>\n\n"
    "{{ m['content'] | trim }}<|eot_id|>{% endfor %}"
    "{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n<think>\n"
    "{% if enable_thinking is defined and not enable_thinking %}</think>\n\n{% endif %}{% endif %}";

inline void write_file(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

// Writes the checkpoint folder (weights, config, tokenizer, template) into `dir`; `think`: a reasoning
// model's tokenizer and template.
inline void write_checkpoint(const fs::path& dir, bool think = false) {
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path source = kData / "llama" / "bf16_gqa_rope_scaled_tied";
  for (const char* f : {"config.json", "model.safetensors"}) fs::copy_file(source / f, dir / f);
  write_file(dir / "tokenizer.json", tokenizer_json(think).dump());
  const Json config = {{"bos_token", "<|begin_of_text|>"},
                       {"eos_token", "<|eot_id|>"},
                       {"chat_template", think ? kThinkTemplate : kTemplate}};
  write_file(dir / "tokenizer_config.json", config.dump());
}

struct TestServerConfig {
  ServerOptions options;
  EngineConfig engine;
  bool draft = false;
  bool attach = true;
  bool reasoning = false;     // a <think> model (kThinkTemplate, think tokens) served with a reasoning parser
  int64_t poison_token = -1;  // >= 0: every target forward whose batch holds this id fails (fault injection)
  bool priority_scheduling = false;  // serve --scheduling-policy priority
  std::vector<std::pair<std::string, fs::path>> lora_modules;  // serve --lora-modules name=DIR ...

  TestServerConfig() {
    options.port = 0;
    options.quiet = true;
    options.http_threads = 96;
    options.limits.keep_alive_idle_s = 1;
    engine.kv_cache_memory = 4u << 20;
    engine.max_length = 256;
    engine.max_num_seqs = 8;
    engine.max_batch_tokens = 128;
    engine.block_size = 8;
  }
};

class TestServer {
 public:
  explicit TestServer(const TestServerConfig& config = TestServerConfig()) : config_(config) {
    dir_ = fs::path(::testing::TempDir()) / ("aerie_serve_" + std::to_string(::getpid()) + "_" + std::to_string(counter()++));
    write_checkpoint(dir_, config.reasoning);
    tokenizer_ = std::make_unique<Tokenizer>(Tokenizer::load(dir_));
    model_ = load_model(dir_, pool_);
    if (config.draft) head_ = load_drafter(kData / "eagle/eagle3_midlayer_d2t", *model_, pool_);
    if (config.poison_token >= 0) poisoned_ = std::make_unique<aerie::testing::PoisonTarget>(*model_, config.poison_token);
    config_.engine.max_queue = config_.options.max_in_flight + 1;
    if (!config.lora_modules.empty()) {
      auto adapters = std::make_shared<LoraSet>();
      for (const auto& [name, path] : config.lora_modules)
        adapters->adapters.push_back(load_lora_adapter(path, model_->lora_targets(), LoraOptions{}, name));
      config_.engine.adapters = adapters;
    }
    engine_ = std::make_unique<Engine>(poisoned_ ? *poisoned_ : *model_, head_.get(), config_.engine, pool_);
    server_ = std::make_unique<HttpServer>(config_.options);
    port_ = server_->bind();
    server_->start();
    if (config.attach) attach();
  }
  ~TestServer() {
    server_.reset();
    fs::remove_all(dir_);
  }

  void attach() {
    ServedModel served;
    served.engine = engine_.get();
    served.tokenizer = tokenizer_.get();
    served.eos_ids = model_->eos_token_ids();
    served.tool_parser = ToolParserKind::kLlama3Json;
    served.chat_template = config_.reasoning ? kThinkTemplate : kTemplate;
    if (config_.reasoning) served.reasoning_parser = ReasoningParserKind::kThink;
    served.n_vocab = model_->n_vocab();
    served.synthetic_acceptance = config_.engine.spec.synthetic_acceptance;
    served.priority_scheduling = config_.priority_scheduling;
    served.relaxed_thinking = config_.engine.spec.relaxed_thinking;
    for (const auto& [name, path] : config_.lora_modules) served.lora_modules.push_back({name, path.string()});
    server_->attach(served);
  }

  int port() const { return port_; }
  HttpServer& server() { return *server_; }
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  const fs::path& dir() const { return dir_; }
  std::unique_ptr<httplib::Client> client() const {
    auto c = std::make_unique<httplib::Client>("127.0.0.1", port_);
    c->set_read_timeout(60, 0);
    c->set_write_timeout(60, 0);
    c->set_keep_alive(true);
    return c;
  }

 private:
  static int& counter() {
    static int n = 0;
    return n;
  }
  TestServerConfig config_;
  fs::path dir_;
  ThreadPool pool_{1};
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<aerie::testing::PoisonTarget> poisoned_;
  std::unique_ptr<DraftHead> head_;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<HttpServer> server_;
  int port_ = 0;
};

struct HttpResult {
  int status = 0;
  std::string body;
  httplib::Headers headers;
  Json json() const { return Json::parse(body); }
};

inline HttpResult post(httplib::Client& client, const std::string& path, const std::string& body,
                       const httplib::Headers& headers = {}) {
  auto res = client.Post(path.c_str(), headers, body, "application/json");
  if (!res) return {-1, "transport error " + std::to_string(int(res.error())), {}};
  return {res->status, res->body, res->headers};
}

inline HttpResult get(httplib::Client& client, const std::string& path, const httplib::Headers& headers = {}) {
  auto res = client.Get(path.c_str(), headers);
  if (!res) return {-1, "transport error", {}};
  return {res->status, res->body, res->headers};
}

// An SSE stream read as it arrives: the JSON of every `data:` event, whether [DONE] came, and how the
// transfer ended. `stop_after` > 0: the client hangs up after that many events.
struct SseResult {
  int status = 0;
  std::vector<Json> events;
  bool done = false;
  bool transport_ok = true;
  int error = 0;  // httplib::Error when the transfer failed
  int comments = 0;
};

// One streamed POST of a JSON body: `status` is set when the response head arrives and `on_data` gets each
// piece of the body as it comes (false hangs up). Every SSE reader of the server tests goes through it.
inline httplib::Result send_streaming(httplib::Client& client, const std::string& path, const Json& body,
                                      const httplib::Headers& headers, int& status,
                                      const std::function<bool(const char*, size_t)>& on_data) {
  httplib::Request req;
  req.method = "POST";
  req.path = path;
  req.headers = headers;
  req.set_header("Content-Type", "application/json");
  req.body = body.dump();
  req.response_handler = [&status](const httplib::Response& r) {
    status = r.status;
    return true;
  };
  req.content_receiver = [&on_data](const char* data, size_t n, uint64_t, uint64_t) { return on_data(data, n); };
  return client.send(req);
}

inline SseResult post_stream(httplib::Client& client, const std::string& path, const Json& body,
                             int stop_after = 0, const httplib::Headers& headers = {}) {
  SseResult out;
  std::string buffer;
  auto on_data = [&](const char* data, size_t n) {
    buffer.append(data, n);
    size_t end;
    while ((end = buffer.find("\n\n")) != std::string::npos) {
      const std::string event = buffer.substr(0, end);
      buffer.erase(0, end + 2);
      if (event.rfind(":", 0) == 0) {
        ++out.comments;
        continue;
      }
      if (event.rfind("data: ", 0) != 0) continue;
      const std::string payload = event.substr(6);
      if (payload == "[DONE]") {
        out.done = true;
        continue;
      }
      out.events.push_back(Json::parse(payload));
      if (stop_after > 0 && int(out.events.size()) >= stop_after) return false;
    }
    return true;
  };
  auto res = send_streaming(client, path, body, headers, out.status, on_data);
  out.transport_ok = bool(res);
  out.error = int(res.error());
  if (res && out.status == 0) out.status = res->status;
  return out;
}

// The text a client assembles from chat chunks (choice `index`) or completion chunks.
inline std::string stream_text(const SseResult& s, int index = 0) {
  std::string text;
  for (const Json& e : s.events) {
    if (!e.contains("choices")) continue;
    for (const Json& c : e["choices"]) {
      if (c["index"] != index) continue;
      if (c.contains("delta")) {
        if (c["delta"].contains("content") && c["delta"]["content"].is_string()) text += c["delta"]["content"].get<std::string>();
      } else if (c.contains("text")) {
        text += c["text"].get<std::string>();
      }
    }
  }
  return text;
}

inline std::string stream_finish_reason(const SseResult& s, int index = 0) {
  std::string reason;
  for (const Json& e : s.events)
    if (e.contains("choices"))
      for (const Json& c : e["choices"])
        if (c["index"] == index && c["finish_reason"].is_string()) reason += c["finish_reason"].get<std::string>();
  return reason;
}

}  // namespace aerie::server::testing
