// A compiled PCRE2 pattern (UTF + Unicode properties, JIT when available) that finds successive matches
// in UTF-8 text. The tokenizer validates its input once up front, so matching skips PCRE2's UTF checks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace aerie {

class Regex {
 public:
  // Throws aerie::Error with PCRE2's message and the offset in the pattern when it does not compile.
  explicit Regex(std::string_view pattern);
  ~Regex();
  Regex(Regex&&) noexcept;
  Regex& operator=(Regex&&) noexcept;
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  const std::string& pattern() const { return pattern_; }

  // Per-thread matching state (match data and JIT stack); one Matcher serves any number of Regex objects.
  //
  // Matching work is bounded (PCRE2's match limit), so a pattern that backtracks catastrophically on some
  // input is an error, not a hang. Each find() first runs under kFirstTryLimit steps, which ordinary
  // matches of real patterns never reach, and costs nothing against the budget; a find that needs more
  // retries with doubling limits, each try charged to a budget of kStepsPerByte per input byte, set by
  // start_budget() once per input (so a whole encode does linear work at most) and capped per call by the
  // same rate over the rest of the subject.
  class Matcher {
   public:
    static constexpr uint64_t kFirstTryLimit = 1'000;
    static constexpr uint64_t kStepsPerByte = 1'000;

    Matcher();
    ~Matcher();
    Matcher(const Matcher&) = delete;
    Matcher& operator=(const Matcher&) = delete;

    // A fresh budget of kStepsPerByte x (input_bytes + 1) x n_passes steps for the finds over one input
    // (a pre-tokenizer's steps each walk the whole text).
    void start_budget(size_t input_bytes, size_t n_passes = 1);

    // Finds the first match in subject[start..]; lookaround sees the whole subject and nothing beyond it.
    // Returns false when there is none; otherwise [*begin, *end) are byte offsets into subject. Throws
    // aerie::Error naming the pattern when the match needs more than the budget allows.
    bool find(const Regex& regex, std::string_view subject, size_t start, size_t* begin, size_t* end);

   private:
    int match(const Regex& regex, std::string_view subject, size_t start, uint64_t limit);
    struct State;
    std::unique_ptr<State> state_;
    uint64_t budget_ = UINT64_MAX;  // steps left for retries over the current input
    size_t budget_bytes_ = 0;       // the input start_budget() sized it for
  };

 private:
  struct Code;
  std::string pattern_;
  std::unique_ptr<Code> code_;
};

// Rewrites the whitespace escapes \s and \S of a tokenizer.json pattern into explicit classes of the
// Unicode White_Space code points, the set Oniguruma (what Hugging Face tokenizers compiles patterns
// with) gives \s; PCRE2's own \s differs (it adds U+180E). Exposed for tests.
std::string translate_whitespace_classes(std::string_view pattern);

}  // namespace aerie
