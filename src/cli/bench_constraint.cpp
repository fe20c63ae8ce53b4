#include "cli/bench_constraint.h"

#include <algorithm>
#include <chrono>

#include <time.h>

#include "cli/prompt.h"
#include "core/error.h"
#include "grammar/json_constraint.h"
#include "grammar/json_schema.h"
#include "grammar/token_trie.h"
#include "models/model.h"
#include "tokenizer/tokenizer.h"

namespace aerie::cli {

namespace {

double thread_cpu_us() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) * 1e6 + double(t.tv_nsec) * 1e-3;
}

}  // namespace

void TimedConstraint::allowed_tokens(std::vector<uint8_t>& allowed) const {
  const double cpu_start = thread_cpu_us();
  const auto start = std::chrono::steady_clock::now();
  inner_->allowed_tokens(allowed);
  const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
  const double cpu_us = thread_cpu_us() - cpu_start;
  const std::lock_guard<std::mutex> lock(times_->mutex);
  times_->us.push_back(us);
  times_->cpu_us.push_back(cpu_us);
}

SchemaConstraints::SchemaConstraints(const std::string& schema_path, const Tokenizer& tokenizer, const Model& model,
                                     std::shared_ptr<MaskTimes> times)
    : times_(std::move(times)) {
  const std::vector<int64_t>& eos = model.eos_token_ids();
  std::vector<std::string> bytes(size_t(model.n_vocab()));
  std::vector<int32_t> end, never;
  for (int64_t id = 0; id < model.n_vocab(); ++id) {
    const bool is_end = std::find(eos.begin(), eos.end(), id) != eos.end();
    if (is_end) end.push_back(int32_t(id));
    if (id >= tokenizer.n_vocab()) continue;  // no bytes: never allowed
    if (!is_end && tokenizer.is_added(int32_t(id))) never.push_back(int32_t(id));
    bytes[size_t(id)] = std::string(tokenizer.token_bytes(int32_t(id)));
  }
  vocabulary_ = std::make_shared<const TokenTrie>(bytes, end, never);
  const std::string text = read_text_file(schema_path, "--json-schema");
  try {
    grammar_ = compile_json_schema_text(text);
  } catch (const Error& e) {
    throw Error(str_cat("--json-schema ", schema_path, ": ", e.what()));
  }
}

std::shared_ptr<const TokenConstraint> SchemaConstraints::make() const {
  return std::make_shared<const TimedConstraint>(make_json_constraint(grammar_, vocabulary_), times_);
}

}  // namespace aerie::cli
