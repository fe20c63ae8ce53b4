// Pre-tokenization: splits normalized text into the pieces ("pre-tokens") that BPE encodes one by one.
// Supports the tokenizer.json components that Llama 3 and DeepSeek-V3 use: Sequence, Split (regex or
// literal pattern, all five delimiter behaviours, invert), Digits, and ByteLevel (which must come last: it
// only marks the pieces as bytes for the byte-level alphabet, and can add a prefix space and split with
// the GPT-2 pattern).
#pragma once

#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "io/regex.h"

namespace aerie {

enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

class PreTokenizer {
 public:
  // Reusable per-call state: PCRE2 match data, buffers, and storage for pieces that are not substrings of
  // the input (a prefix space).
  struct Scratch {
    Regex::Matcher matcher;
    std::vector<std::string_view> swap;
    std::deque<std::string> arena;
    struct Match {
      size_t begin, end;
      bool is_match;
    };
    std::vector<Match> matches;
    struct Run {
      size_t begin, end;
      bool remove;
    };
    std::vector<Run> runs;
  };

  // Builds from the "pre_tokenizer" object of tokenizer.json (null: the text is one piece). Throws
  // aerie::Error naming the component for unsupported types and malformed fields.
  static PreTokenizer from_json(const nlohmann::json& config);

  PreTokenizer();
  ~PreTokenizer();
  PreTokenizer(PreTokenizer&&) noexcept;
  PreTokenizer& operator=(PreTokenizer&&) noexcept;

  // Appends the non-empty pieces of `text` to `pieces`. Pieces view `text` or scratch.arena, so they live
  // until the scratch is cleared.
  void split(std::string_view text, Scratch& scratch, std::vector<std::string_view>& pieces) const;

  // True when a ByteLevel component ends the chain: the model then sees the pieces as raw bytes.
  bool byte_level() const { return byte_level_; }

  // One Split over one piece, as tokenizer.json defines it; exposed for tests.
  struct SplitStep;

 private:
  std::vector<SplitStep> steps_;
  bool byte_level_ = false;
  bool byte_level_prefix_space_ = false;
  bool byte_level_regex_ = false;  // the last step is ByteLevel's GPT-2 split
};

struct PreTokenizer::SplitStep {
  std::unique_ptr<Regex> regex;  // null: `literal` is the pattern
  std::string literal;
  SplitBehavior behavior = SplitBehavior::kIsolated;
  bool invert = false;

  void apply(std::string_view piece, Scratch& scratch, std::vector<std::string_view>& out) const;
};

}  // namespace aerie
