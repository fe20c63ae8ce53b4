// The byte-level alphabet of GPT-2 style BPE: every byte is shown as one printable code point, so that
// vocabularies can be stored as text. Printable Latin-1 bytes stand for themselves; the other 68 bytes
// (controls, space, DEL, NBSP, soft hyphen) are moved to U+0100.. in byte order.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace aerie {

// The code point that stands for byte b.
uint32_t byte_level_code_point(uint8_t b);

// The UTF-8 text of the code point that stands for byte b (e.g. 0x20 -> "Ġ").
std::string_view byte_level_char(uint8_t b);

// Maps byte-level text back to raw bytes; nullopt when some character is outside the alphabet.
std::optional<std::string> byte_level_decode(std::string_view text);

// Maps raw bytes to byte-level text.
std::string byte_level_encode(std::string_view bytes);

}  // namespace aerie
