#include "io/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>

#include "core/error.h"

namespace aerie {
namespace {

// The Unicode White_Space property, written for use inside a character class.
constexpr std::string_view kWhiteSpaceClassBody =
    "\\x{9}-\\x{D}\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}"
    "\\x{3000}";

std::string pcre2_message(int code) {
  PCRE2_UCHAR buffer[256];
  const int n = pcre2_get_error_message(code, buffer, sizeof(buffer));
  return n < 0 ? str_cat("PCRE2 error ", code) : std::string(reinterpret_cast<char*>(buffer));
}

}  // namespace

std::string translate_whitespace_classes(std::string_view pattern) {
  std::string out;
  out.reserve(pattern.size() + 64);
  bool in_class = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char next = pattern[i + 1];
      ++i;
      if (next == 's') {
        out += in_class ? std::string(kWhiteSpaceClassBody) : str_cat("[", kWhiteSpaceClassBody, "]");
      } else if (next == 'S' && !in_class) {
        out += str_cat("[^", kWhiteSpaceClassBody, "]");
      } else if (next == 'S') {
        // A negated class inside a class cannot be spelled as a flat list; keep PCRE2's \S, which differs
        // from White_Space only at U+180E.
        out += "\\S";
      } else if (next == 'Q') {
        // \Q...\E quotes literally: copy through unchanged.
        const size_t end = pattern.find("\\E", i + 1);
        const size_t stop = end == std::string_view::npos ? pattern.size() : end + 2;
        out += pattern.substr(i - 1, stop - (i - 1));
        i = stop - 1;
      } else {
        out += c;
        out += next;
      }
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      out += c;
      // A ']' right after '[' or '[^' is a literal member, not the end of the class.
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') out += pattern[++i];
      if (i + 1 < pattern.size() && pattern[i + 1] == ']') out += pattern[++i];
      continue;
    }
    if (in_class && c == ']') in_class = false;
    out += c;
  }
  return out;
}

struct Regex::Code {
  pcre2_code* code = nullptr;
  bool jit = false;
  ~Code() { pcre2_code_free(code); }
};

Regex::Regex(std::string_view pattern) : pattern_(pattern), code_(std::make_unique<Code>()) {
  const std::string translated = translate_whitespace_classes(pattern);
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  code_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(translated.data()), translated.size(),
                              PCRE2_UTF | PCRE2_UCP, &error_code, &error_offset, nullptr);
  AERIE_CHECK(code_->code != nullptr, "tokenizer regex /", pattern, "/ does not compile: ",
              pcre2_message(error_code), " (at offset ", error_offset, " of the translated pattern)");
  // Without JIT support PCRE2 still matches, only slower.
  code_->jit = pcre2_jit_compile(code_->code, PCRE2_JIT_COMPLETE) == 0;
}

Regex::~Regex() = default;
Regex::Regex(Regex&&) noexcept = default;
Regex& Regex::operator=(Regex&&) noexcept = default;

struct Regex::Matcher::State {
  pcre2_match_data* data = nullptr;
  pcre2_match_context* context = nullptr;
  pcre2_jit_stack* jit_stack = nullptr;
  ~State() {
    pcre2_match_data_free(data);
    pcre2_match_context_free(context);
    pcre2_jit_stack_free(jit_stack);
  }
};

Regex::Matcher::Matcher() : state_(std::make_unique<State>()) {
  // The tokenizer patterns have no capture groups; one pair of offsets is the whole match.
  state_->data = pcre2_match_data_create(1, nullptr);
  state_->context = pcre2_match_context_create(nullptr);
  // Long runs (a megabyte of spaces) backtrack deeply in `\s+(?!\S)`: give JIT more than its 32 KiB.
  state_->jit_stack = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, nullptr);
  AERIE_CHECK(state_->data && state_->context && state_->jit_stack, "tokenizer: out of memory for PCRE2");
  pcre2_jit_stack_assign(state_->context, nullptr, state_->jit_stack);
}

Regex::Matcher::~Matcher() = default;

void Regex::Matcher::start_budget(size_t input_bytes, size_t n_passes) {
  budget_ = kStepsPerByte * (uint64_t(input_bytes) + 1) * std::max<uint64_t>(n_passes, 1);
  budget_bytes_ = input_bytes;
}

int Regex::Matcher::match(const Regex& regex, std::string_view subject, size_t start, uint64_t limit) {
  pcre2_set_match_limit(state_->context, uint32_t(std::min<uint64_t>(limit, UINT32_MAX)));
  const auto* text = reinterpret_cast<PCRE2_SPTR>(subject.data());
  return regex.code_->jit
             ? pcre2_jit_match(regex.code_->code, text, subject.size(), start, 0, state_->data, state_->context)
             : pcre2_match(regex.code_->code, text, subject.size(), start, PCRE2_NO_UTF_CHECK, state_->data,
                           state_->context);
}

bool Regex::Matcher::find(const Regex& regex, std::string_view subject, size_t start, size_t* begin,
                          size_t* end) {
  // The most one call may take: the budget's rate over the rest of the subject, and what the input's
  // budget has left.
  const uint64_t call_cap = std::min<uint64_t>(kStepsPerByte * (uint64_t(subject.size() - start) + 1), budget_);
  uint64_t limit = kFirstTryLimit;
  int rc = match(regex, subject, start, limit);
  while (rc == PCRE2_ERROR_MATCHLIMIT) {
    if (limit >= call_cap || budget_ == 0) {
      throw Error(str_cat("tokenizer regex /", regex.pattern_, "/ exceeded its matching budget (", kStepsPerByte,
                          " steps per byte of a ", std::max(budget_bytes_, subject.size()),
                          "-byte input): the pattern backtracks catastrophically on this text"));
    }
    limit = std::min(limit * 2, call_cap);
    budget_ -= std::min(limit, budget_);  // charged up front: the try may use all of it
    rc = match(regex, subject, start, limit);
  }
  if (rc == PCRE2_ERROR_NOMATCH) return false;
  AERIE_CHECK(rc >= 0, "tokenizer regex /", regex.pattern_, "/ failed on a ", subject.size(),
              "-byte piece: ", pcre2_message(rc));
  const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(state_->data);
  *begin = ovector[0];
  *end = ovector[1];
  return true;
}

}  // namespace aerie
