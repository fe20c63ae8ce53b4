// bench-engine --json-schema FILE (issue 41 item 6): every request of a "json" run is constrained by the
// schema, as a server's response_format would constrain it, and every mask the engine asks for (plain rows,
// verification rows and drafts) is timed, so the mask's per-token cost is measured inside real constrained
// generation at the model's own vocabulary size (e.g. 128k ids for a Llama 3 tokenizer).
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "sample/token_constraint.h"

namespace aerie {
class Model;
class Tokenizer;
class TokenTrie;
struct JsonGrammar;
}  // namespace aerie

namespace aerie::cli {

// The microseconds of every allowed_tokens call made through a TimedConstraint: wall time, and the calling
// thread's CPU time (which leaves out waiting for a core on a loaded host).
struct MaskTimes {
  std::mutex mutex;
  std::vector<double> us, cpu_us;
};

// Forwards everything to `inner`; allowed_tokens is timed into `times` (clones share it).
class TimedConstraint final : public TokenConstraint {
 public:
  TimedConstraint(std::unique_ptr<TokenConstraint> inner, std::shared_ptr<MaskTimes> times)
      : inner_(std::move(inner)), times_(std::move(times)) {}
  void allowed_tokens(std::vector<uint8_t>& allowed) const override;
  bool accept(int64_t token) override { return inner_->accept(token); }
  bool accept_bytes(std::string_view bytes) override { return inner_->accept_bytes(bytes); }
  bool finished() const override { return inner_->finished(); }
  std::unique_ptr<TokenConstraint> clone() const override {
    return std::make_unique<TimedConstraint>(inner_->clone(), times_);
  }

 private:
  std::unique_ptr<TokenConstraint> inner_;
  std::shared_ptr<MaskTimes> times_;
};

// The JSON schema of `schema_path` compiled once over the model's ids, as the server builds them
// (end-of-sequence ids end the output, added tokens never appear; compact whitespace). make() gives each
// request a constraint of its own, timed into `times`: as in the server, where every request compiles its
// schema, each starts with an empty mask cache (json_mask.h) that its drafts and verification rows share.
// Throws aerie::Error naming the file for a schema the server would refuse.
class SchemaConstraints {
 public:
  SchemaConstraints(const std::string& schema_path, const Tokenizer& tokenizer, const Model& model,
                    std::shared_ptr<MaskTimes> times);
  std::shared_ptr<const TokenConstraint> make() const;

 private:
  std::shared_ptr<const JsonGrammar> grammar_;
  std::shared_ptr<const TokenTrie> vocabulary_;
  std::shared_ptr<MaskTimes> times_;
};

}  // namespace aerie::cli
