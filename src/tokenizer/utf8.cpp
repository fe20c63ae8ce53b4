#include "tokenizer/utf8.h"

#include "core/error.h"

namespace aerie {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// The allowed range of the second byte of a sequence, which depends on the lead byte (this is what
// excludes overlong forms, surrogates and code points above U+10FFFF); later bytes are 80..BF.
struct LeadInfo {
  uint8_t length;  // 0: the byte cannot start a sequence
  uint8_t second_lo;
  uint8_t second_hi;
};

LeadInfo lead_info(uint8_t b) {
  if (b < 0x80) return {1, 0, 0};
  if (b >= 0xC2 && b <= 0xDF) return {2, 0x80, 0xBF};
  if (b == 0xE0) return {3, 0xA0, 0xBF};
  if (b == 0xED) return {3, 0x80, 0x9F};
  if (b >= 0xE1 && b <= 0xEF) return {3, 0x80, 0xBF};
  if (b == 0xF0) return {4, 0x90, 0xBF};
  if (b >= 0xF1 && b <= 0xF3) return {4, 0x80, 0xBF};
  if (b == 0xF4) return {4, 0x80, 0x8F};
  return {0, 0, 0};
}

// Scans the sequence at in[pos]. Returns the number of well-formed bytes: info.length when the sequence is
// complete, fewer when it is cut short by an invalid byte or by the end of the input (`truncated` tells
// which).
size_t scan_sequence(std::string_view in, size_t pos, const LeadInfo& info, bool* truncated) {
  *truncated = false;
  size_t n = 1;
  for (; n < info.length; ++n) {
    if (pos + n >= in.size()) {
      *truncated = true;
      return n;
    }
    const auto b = static_cast<uint8_t>(in[pos + n]);
    const bool ok = n == 1 ? (b >= info.second_lo && b <= info.second_hi) : (b >= 0x80 && b <= 0xBF);
    if (!ok) return n;
  }
  return n;
}

}  // namespace

size_t find_invalid_utf8(std::string_view text) {
  size_t pos = 0;
  while (pos < text.size()) {
    // ASCII fast path, 8 bytes at a time.
    while (pos + 8 <= text.size()) {
      uint64_t word;
      __builtin_memcpy(&word, text.data() + pos, 8);
      if (word & 0x8080808080808080ull) break;
      pos += 8;
    }
    if (pos >= text.size()) break;
    const LeadInfo info = lead_info(static_cast<uint8_t>(text[pos]));
    if (info.length == 0) return pos;
    bool truncated = false;
    if (scan_sequence(text, pos, info, &truncated) != info.length) return pos;
    pos += info.length;
  }
  return text.size();
}

void validate_utf8(std::string_view text, std::string_view what) {
  const size_t bad = find_invalid_utf8(text);
  if (bad == text.size()) return;
  throw_error(str_cat(what, " is not valid UTF-8: ill-formed sequence at byte offset ", bad, " (byte 0x",
                      std::hex, static_cast<int>(static_cast<uint8_t>(text[bad])), ")"));
}

size_t append_utf8_lossy(std::string_view in, std::string& out, bool final) {
  size_t pos = 0;
  size_t run_start = 0;  // start of the pending run of valid bytes, copied in one go
  while (pos < in.size()) {
    const LeadInfo info = lead_info(static_cast<uint8_t>(in[pos]));
    if (info.length == 1) {
      ++pos;
      continue;
    }
    bool truncated = false;
    const size_t n = info.length == 0 ? 1 : scan_sequence(in, pos, info, &truncated);
    if (n == info.length) {
      pos += n;
      continue;
    }
    out.append(in.substr(run_start, pos - run_start));
    if (truncated && !final) return pos;  // may still complete: keep it for the next call
    out.append(kReplacement);
    pos += n;
    run_start = pos;
  }
  out.append(in.substr(run_start, pos - run_start));
  return pos;
}

}  // namespace aerie
