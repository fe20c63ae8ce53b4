// A compiled PCRE2 pattern (UTF + Unicode properties, JIT when available) that finds successive matches
// in UTF-8 text. The tokenizer validates its input once up front, so matching skips PCRE2's UTF checks.
#pragma once

#include <cstddef>
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
  class Matcher {
   public:
    Matcher();
    ~Matcher();
    Matcher(const Matcher&) = delete;
    Matcher& operator=(const Matcher&) = delete;

    // Finds the first match in subject[start..]; lookaround sees the whole subject and nothing beyond it.
    // Returns false when there is none; otherwise [*begin, *end) are byte offsets into subject.
    bool find(const Regex& regex, std::string_view subject, size_t start, size_t* begin, size_t* end);

   private:
    struct State;
    std::unique_ptr<State> state_;
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
