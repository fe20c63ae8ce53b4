// UTF-8 helpers for the tokenizer: strict validation of input text and the lossy, streaming-safe
// conversion that decoding uses (byte-level tokens can end in the middle of a character).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace aerie {

// Throws aerie::Error naming the byte offset of the first ill-formed sequence (overlong forms, surrogates
// and code points above U+10FFFF are ill-formed). `what` names the text in the message.
void validate_utf8(std::string_view text, std::string_view what = "input text");

// Byte offset of the first ill-formed sequence, or text.size() when the text is valid UTF-8.
size_t find_invalid_utf8(std::string_view text);

// Appends `in` to `out`, replacing each maximal ill-formed subpart with U+FFFD (the Unicode-recommended
// practice that Rust's from_utf8_lossy follows). With final == false an incomplete but still valid
// sequence at the very end is left unconsumed, so that the caller can retry once more bytes arrive; the
// result of feeding bytes in pieces then equals the result of feeding them all at once.
// Returns the number of bytes consumed.
size_t append_utf8_lossy(std::string_view in, std::string& out, bool final);

// Length in bytes of the UTF-8 sequence that starts with `lead` (1 for bytes that cannot start one).
inline size_t utf8_sequence_length(uint8_t lead) {
  if (lead < 0xC0) return 1;
  if (lead < 0xE0) return 2;
  if (lead < 0xF0) return 3;
  return lead < 0xF8 ? 4 : 1;
}

}  // namespace aerie
