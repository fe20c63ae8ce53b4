// GET /metrics: the engine's counters, gauges and latency histograms in the Prometheus text format, or in
// OpenMetrics 1.0 with exemplars when the scraper asks for it (Accept).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <string_view>
#include <utility>

#include "server/endpoints.h"

namespace aerie::server {
namespace {

// The page being written and its format. OpenMetrics differs from the text format in what this page uses
// in three places: a counter's family (# HELP, # TYPE) is named without the _total its samples carry, a
// histogram bucket may end with an exemplar, and the page ends with # EOF.
struct Writer {
  std::string out;
  bool openmetrics = false;
};

std::string number(double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), "%.17g", value);
  return buffer;
}

// Seconds since the Unix epoch to the millisecond (an exemplar's timestamp).
std::string timestamp(double unix_seconds) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), "%.3f", unix_seconds);
  return buffer;
}

void header(Writer& w, const char* name, const char* type, const char* help) {
  std::string_view family = name;
  if (w.openmetrics && std::string_view(type) == "counter" && family.ends_with("_total"))
    family.remove_suffix(6);
  w.out += "# HELP ";
  w.out += family;
  w.out += ' ';
  w.out += help;
  w.out += "\n# TYPE ";
  w.out += family;
  w.out += ' ';
  w.out += type;
  w.out += '\n';
}

void metric(Writer& w, const char* name, const char* type, const char* help, double value) {
  header(w, name, type, help);
  w.out += name;
  w.out += ' ';
  w.out += number(value);
  w.out += '\n';
}

// A label value with \\, " and newlines escaped (the text format's rule).
std::string label_value(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

// `labels`: "" or label pairs without braces (model_name="m"), put before any le. In OpenMetrics a bucket
// that a labelled request's observation fell in last carries it as an exemplar.
void histogram(Writer& w, const char* name, const char* help, const Histogram& h, const std::string& labels = "") {
  header(w, name, "histogram", help);
  std::string& out = w.out;
  const std::string prefix = labels.empty() ? "" : labels + ",";
  const std::string braces = labels.empty() ? "" : "{" + labels + "}";
  int64_t cumulative = 0;
  for (size_t i = 0; i < h.counts().size(); ++i) {
    cumulative += h.counts()[i];
    const std::string le = i < h.bounds().size() ? number(h.bounds()[i]) : "+Inf";
    out += std::string(name) + "_bucket{" + prefix + "le=\"" + le + "\"} " + std::to_string(cumulative);
    const Exemplar& e = h.exemplars()[i];
    if (w.openmetrics && !e.label.empty()) {
      out += " # {request_id=\"" + label_value(std::string(e.label.view())) + "\"} " + number(e.value) + " " +
             timestamp(e.unix_seconds);
    }
    out += "\n";
  }
  out += std::string(name) + "_sum" + braces + " " + number(h.sum()) + "\n";
  out += std::string(name) + "_count" + braces + " " + std::to_string(h.count()) + "\n";
}

// The vLLM names (vLLM's metrics design document lists them): the same figures as the aerie_ metrics.
void vllm_metrics(Writer& w, const EngineMetrics& m, const std::string& model_name) {
  std::string& out = w.out;
  const std::string model = "model_name=\"" + label_value(model_name) + "\"";
  auto sample = [&](const char* name, const char* type, const char* help, double value, const std::string& extra = "") {
    header(w, name, type, help);
    out += std::string(name) + "{" + model + extra + "} " + number(value) + "\n";
  };
  const double usage = m.kv_blocks_total > 0 ? double(m.kv_blocks_in_use) / double(m.kv_blocks_total) : 0.0;
  sample("vllm:num_requests_running", "gauge", "Number of requests in model execution batches.", double(m.running));
  sample("vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed.", double(m.waiting));
  sample("vllm:kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage.", usage);
  sample("vllm:gpu_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage (the older name).", usage);
  sample("vllm:num_preemptions_total", "counter", "Cumulative number of preemptions from the engine.",
         double(m.preemptions));
  sample("vllm:prompt_tokens_total", "counter", "Number of prefill tokens processed.", double(m.prompt_tokens));
  sample("vllm:generation_tokens_total", "counter", "Number of generation tokens processed.",
         double(m.generated_tokens));
  sample("vllm:prefix_cache_queries_total", "counter", "Prefix cache queries, in KV blocks (aerie counts blocks).",
         double(m.prefix_block_lookups));
  sample("vllm:prefix_cache_hits_total", "counter", "Prefix cache hits, in KV blocks (aerie counts blocks).",
         double(m.prefix_block_hits));
  header(w, "vllm:request_success_total", "counter", "Count of successfully processed requests.");
  const std::pair<const char*, int64_t> reasons[] = {
      {"stop", m.finished_stop}, {"length", m.finished_length}, {"abort", m.requests_cancelled}};
  for (const auto& [reason, count] : reasons)
    out += "vllm:request_success_total{" + model + ",finished_reason=\"" + reason + "\"} " + std::to_string(count) + "\n";
  histogram(w, "vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.",
            m.time_to_first_token, model);
  histogram(w, "vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.",
            m.inter_token_latency, model);
  histogram(w, "vllm:time_per_output_token_seconds", "Histogram of time per output token in seconds.",
            m.time_per_output_token, model);
  histogram(w, "vllm:e2e_request_latency_seconds", "Histogram of end to end request latency in seconds.",
            m.e2e_request_latency, model);
  histogram(w, "vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.",
            m.request_queue_time, model);
  histogram(w, "vllm:request_prefill_time_seconds", "Histogram of time spent in PREFILL phase for request.",
            m.request_prefill_time, model);
  histogram(w, "vllm:request_decode_time_seconds", "Histogram of time spent in DECODE phase for request.",
            m.request_decode_time, model);
  histogram(w, "vllm:request_inference_time_seconds", "Histogram of time spent in RUNNING phase for request.",
            m.request_inference_time, model);
  histogram(w, "vllm:request_prompt_tokens", "Number of prefill tokens processed.", m.request_prompt_tokens, model);
  histogram(w, "vllm:request_generation_tokens", "Number of generation tokens processed.",
            m.request_generation_tokens, model);
  const SpecStats& s = m.spec;
  sample("vllm:spec_decode_num_drafts_total", "counter", "Number of spec decoding drafts.", double(s.rounds));
  sample("vllm:spec_decode_num_draft_tokens_total", "counter", "Number of draft tokens.", double(s.draft_tokens));
  sample("vllm:spec_decode_num_accepted_tokens_total", "counter", "Number of accepted tokens.",
         double(s.accepted_tokens));
  header(w, "vllm:spec_decode_num_accepted_tokens_per_pos_total", "counter",
         "Accepted tokens per draft position.");
  for (size_t i = 0; i < s.accepted_at.size(); ++i)
    out += "vllm:spec_decode_num_accepted_tokens_per_pos_total{" + model + ",position=\"" + std::to_string(i) +
           "\"} " + std::to_string(s.accepted_at[i]) + "\n";
  if (!m.lora_names.empty()) {
    // vLLM's: the adapters with requests running and waiting (comma-separated names) and how many are
    // loaded, as labels; the value is the time of the scrape.
    auto with_requests = [&](const std::vector<int64_t>& counts) {
      std::string names;
      for (size_t i = 0; i < counts.size() && i < m.lora_names.size(); ++i)
        if (counts[i] > 0) names += (names.empty() ? "" : ",") + m.lora_names[i];
      return label_value(names);
    };
    header(w, "vllm:lora_requests_info", "gauge", "Running stats on lora requests.");
    const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    out += "vllm:lora_requests_info{max_lora=\"" + std::to_string(m.lora_names.size()) + "\",running_lora_adapters=\"" +
           with_requests(m.lora_running) + "\",waiting_lora_adapters=\"" + with_requests(m.lora_waiting) + "\"} " +
           number(now) + "\n";
  }
}

std::string_view trimmed(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool equal_ignoring_case(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? char(c - 'A' + 'a') : c; };
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

// A media range's q parameter (RFC 9110: 0 to 1 with at most three decimals); 1 when absent, 0 when malformed
// (the range is then as good as absent).
double quality(std::string_view params) {
  while (!params.empty()) {
    const size_t semi = params.find(';');
    const std::string_view param = trimmed(params.substr(0, semi));
    params = semi == std::string_view::npos ? std::string_view() : params.substr(semi + 1);
    if (param.size() < 2 || (param[0] != 'q' && param[0] != 'Q') || param[1] != '=') continue;
    const std::string_view v = param.substr(2);
    if (v.empty() || v.size() > 5 || (v[0] != '0' && v[0] != '1')) return 0;
    if (v.size() == 1) return v[0] == '1' ? 1 : 0;
    if (v[1] != '.') return 0;
    double q = v[0] - '0', scale = 0.1;
    for (char c : v.substr(2)) {
      if (c < '0' || c > '9') return 0;
      q += (c - '0') * scale;
      scale /= 10;
    }
    return q <= 1 ? q : 0;
  }
  return 1;
}

}  // namespace

bool wants_openmetrics(std::string_view accept) {
  double openmetrics = 0, text = 0;
  while (!accept.empty()) {
    const size_t comma = accept.find(',');
    const std::string_view range = accept.substr(0, comma);
    accept = comma == std::string_view::npos ? std::string_view() : accept.substr(comma + 1);
    const size_t semi = range.find(';');
    const std::string_view type = trimmed(range.substr(0, semi));
    const double q = quality(semi == std::string_view::npos ? std::string_view() : range.substr(semi + 1));
    if (equal_ignoring_case(type, "application/openmetrics-text")) {
      openmetrics = std::max(openmetrics, q);
    } else if (equal_ignoring_case(type, "text/plain") || type == "*/*" || equal_ignoring_case(type, "text/*")) {
      text = std::max(text, q);
    }
  }
  return openmetrics > 0 && openmetrics >= text;
}

std::string prometheus_text(const EngineMetrics& m, const HttpCounters& http, int64_t in_flight, bool ready,
                            const std::string& model_name, bool openmetrics) {
  Writer w{std::string(), openmetrics};
  std::string& out = w.out;
  metric(w, "aerie_ready", "gauge", "1 when the model is loaded and the server takes requests.", ready ? 1 : 0);
  metric(w, "aerie_requests_running", "gauge", "Requests the engine is running.", double(m.running));
  metric(w, "aerie_requests_waiting", "gauge", "Requests waiting for the engine.", double(m.waiting));
  metric(w, "aerie_requests_in_flight", "gauge", "Engine requests admitted by the server and not finished.",
         double(in_flight));
  metric(w, "aerie_kv_blocks_total", "gauge", "KV cache blocks in the pool.", double(m.kv_blocks_total));
  metric(w, "aerie_kv_blocks_in_use", "gauge", "KV cache blocks held by sequences.", double(m.kv_blocks_in_use));
  metric(w, "aerie_kv_blocks_cached", "gauge", "Free KV cache blocks that still hold a cached prefix.",
         double(m.kv_blocks_cached));
  metric(w, "aerie_kv_cache_usage_ratio", "gauge", "Fraction of KV cache blocks in use.",
         m.kv_blocks_total > 0 ? double(m.kv_blocks_in_use) / double(m.kv_blocks_total) : 0.0);
  metric(w, "aerie_prefix_cache_lookups_total", "counter", "Prefix cache block lookups.", double(m.prefix_block_lookups));
  metric(w, "aerie_prefix_cache_hits_total", "counter", "Prefix cache block hits.", double(m.prefix_block_hits));
  // --kv-cache-dir: the disk tier (target's and draft head's blocks together; all zero without it).
  const DiskStoreStats& d = m.kv_disk;
  metric(w, "aerie_kv_disk_blocks", "gauge", "KV blocks in the disk tier's files.", double(d.blocks));
  metric(w, "aerie_kv_disk_bytes", "gauge", "Bytes of the disk tier's block files.", double(d.bytes));
  metric(w, "aerie_kv_disk_hits_total", "counter", "Blocks read back from the disk tier.", double(d.hits));
  metric(w, "aerie_kv_disk_written_total", "counter", "Block files written to the disk tier.", double(d.written));
  metric(w, "aerie_kv_disk_dropped_total", "counter", "Blocks not written: the write queue was full.",
         double(d.dropped));
  metric(w, "aerie_kv_disk_write_failures_total", "counter", "Block files that could not be written (logged).",
         double(d.write_failures));
  metric(w, "aerie_kv_disk_evicted_total", "counter", "Block files removed to stay within --kv-cache-disk-bytes.",
         double(d.evicted));
  metric(w, "aerie_kv_disk_bad_files_total", "counter", "Truncated, corrupt or mismatched block files removed.",
         double(d.bad_files));
  metric(w, "aerie_requests_submitted_total", "counter", "Requests submitted to the engine.", double(m.requests_submitted));
  metric(w, "aerie_requests_finished_total", "counter", "Requests that finished (stop or length).",
         double(m.requests_finished));
  metric(w, "aerie_requests_failed_total", "counter", "Requests that failed inside the engine (the others went on).",
         double(m.requests_failed));
  metric(w, "aerie_requests_cancelled_total", "counter", "Requests cancelled (client gone, stop string, shutdown).",
         double(m.requests_cancelled));
  metric(w, "aerie_preemptions_total", "counter", "Sequences preempted for KV cache space.", double(m.preemptions));
  metric(w, "aerie_prompt_tokens_total", "counter", "Prompt tokens submitted.", double(m.prompt_tokens));
  metric(w, "aerie_cached_prompt_tokens_total", "counter", "Prompt tokens served from the prefix cache.",
         double(m.cached_prompt_tokens));
  metric(w, "aerie_prefilled_tokens_total", "counter", "Prompt tokens computed.", double(m.prefilled_tokens));
  metric(w, "aerie_generation_tokens_total", "counter", "Tokens generated.", double(m.generated_tokens));
  metric(w, "aerie_engine_steps_total", "counter", "Engine steps.", double(m.steps));
  if (!m.lora_names.empty()) {  // LoRA adapters (serve --lora-modules), one sample per adapter
    const std::pair<const char*, const std::vector<int64_t>*> per_adapter[] = {
        {"aerie_lora_requests_running", &m.lora_running},
        {"aerie_lora_requests_waiting", &m.lora_waiting},
        {"aerie_lora_requests_ended_total", &m.lora_requests_ended}};
    const char* const helps[] = {"Requests running with each LoRA adapter.",
                                 "Requests waiting to run with each LoRA adapter.",
                                 "Requests with each LoRA adapter that ended (any reason)."};
    for (size_t k = 0; k < 3; ++k) {
      const auto& [name, counts] = per_adapter[k];
      header(w, name, k == 2 ? "counter" : "gauge", helps[k]);
      for (size_t i = 0; i < counts->size() && i < m.lora_names.size(); ++i)
        out += std::string(name) + "{adapter=\"" + label_value(m.lora_names[i]) + "\"} " +
               std::to_string((*counts)[i]) + "\n";
    }
  }
  if (!m.attention_rows_per_rank.empty()) {  // data-parallel attention
    header(w, "aerie_attention_rows_total", "counter", "Target rows whose attention each rank ran (data-parallel attention).");
    for (size_t r = 0; r < m.attention_rows_per_rank.size(); ++r)
      out += "aerie_attention_rows_total{rank=\"" + std::to_string(r) + "\"} " +
             std::to_string(m.attention_rows_per_rank[r]) + "\n";
  }

  const SpecStats& s = m.spec;
  metric(w, "aerie_spec_decode_rounds_total", "counter", "Verification forwards that carried drafts.", double(s.rounds));
  metric(w, "aerie_spec_decode_draft_tokens_total", "counter", "Draft tokens proposed and verified.",
         double(s.draft_tokens));
  metric(w, "aerie_spec_decode_accepted_tokens_total", "counter", "Draft tokens accepted.", double(s.accepted_tokens));
  metric(w, "aerie_spec_decode_acceptance_rate", "gauge", "Accepted / drafted tokens.", s.acceptance_rate());
  metric(w, "aerie_spec_decode_mean_acceptance_length", "gauge",
         "Tokens per verification forward: 1 + accepted / rounds.", s.rounds > 0 ? s.mean_acceptance_length() : 0.0);
  header(w, "aerie_spec_decode_acceptance_per_position", "gauge",
         "Acceptance rate of the draft at each position of the chain.");
  const std::vector<double> per_position = s.acceptance_per_position();
  for (size_t i = 0; i < per_position.size(); ++i)
    out += "aerie_spec_decode_acceptance_per_position{position=\"" + std::to_string(i) + "\"} " +
           number(per_position[i]) + "\n";
  header(w, "aerie_spec_decode_accepted_at_position_total", "counter", "Drafts accepted at each chain position.");
  for (size_t i = 0; i < s.accepted_at.size(); ++i)
    out += "aerie_spec_decode_accepted_at_position_total{position=\"" + std::to_string(i) + "\"} " +
           std::to_string(s.accepted_at[i]) + "\n";

  histogram(w, "aerie_spec_decode_draft_tokens_per_step", "Drafts verified per decoding sequence and step "
            "(K; 0: a plain step). --num-speculative-tokens auto chooses it per sequence.", m.draft_tokens_per_step);
  metric(w, "aerie_spec_decode_plain_steps_total", "counter", "Decode steps of a sequence that carried no draft.",
         double(s.plain_rounds));
  histogram(w, "aerie_time_to_first_token_seconds", "Time from submission to the first token.", m.time_to_first_token);
  histogram(w, "aerie_inter_token_latency_seconds", "Time between consecutive tokens of a request.",
            m.inter_token_latency);

  metric(w, "aerie_http_requests_total", "counter", "HTTP requests answered (refusals from the head included).",
         double(http.requests));
  header(w, "aerie_http_responses_total", "counter", "HTTP responses by status class.");
  out += "aerie_http_responses_total{code=\"2xx\"} " + std::to_string(http.responses_2xx) + "\n";
  out += "aerie_http_responses_total{code=\"4xx\"} " + std::to_string(http.responses_4xx) + "\n";
  out += "aerie_http_responses_total{code=\"5xx\"} " + std::to_string(http.responses_5xx) + "\n";
  metric(w, "aerie_http_rejected_total", "counter", "Requests refused with 429/503 (queue full or draining).",
         double(http.rejected_overload));
  metric(w, "aerie_http_client_disconnects_total", "counter", "Streams whose client went away before the end.",
         double(http.client_disconnects));
  vllm_metrics(w, m, model_name);
  if (openmetrics) out += "# EOF\n";
  return out;
}

}  // namespace aerie::server
