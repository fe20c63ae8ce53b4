#include "tokenizer/byte_level.h"

#include <array>

namespace aerie {
namespace {

bool stands_for_itself(uint32_t b) { return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE; }

struct Tables {
  std::array<uint32_t, 256> code_point{};
  std::array<std::string, 256> utf8;
  // Inverse over U+0000..U+0143, the whole range the alphabet uses; -1 where no byte maps.
  std::array<int16_t, 0x144> byte_of{};

  Tables() {
    byte_of.fill(-1);
    uint32_t next = 0x100;
    for (uint32_t b = 0; b < 256; ++b) {
      const uint32_t cp = stands_for_itself(b) ? b : next++;
      code_point[b] = cp;
      byte_of[cp] = static_cast<int16_t>(b);
      // Every code point here is below U+0800: one or two UTF-8 bytes.
      if (cp < 0x80) {
        utf8[b] = std::string(1, static_cast<char>(cp));
      } else {
        utf8[b] = {static_cast<char>(0xC0 | (cp >> 6)), static_cast<char>(0x80 | (cp & 0x3F))};
      }
    }
  }
};

const Tables& tables() {
  static const Tables kTables;
  return kTables;
}

}  // namespace

uint32_t byte_level_code_point(uint8_t b) { return tables().code_point[b]; }

std::string_view byte_level_char(uint8_t b) { return tables().utf8[b]; }

std::optional<std::string> byte_level_decode(std::string_view text) {
  const Tables& t = tables();
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const auto b0 = static_cast<uint8_t>(text[i]);
    uint32_t cp;
    if (b0 < 0x80) {
      cp = b0;
      i += 1;
    } else if ((b0 & 0xE0) == 0xC0 && i + 1 < text.size()) {
      cp = ((b0 & 0x1Fu) << 6) | (static_cast<uint8_t>(text[i + 1]) & 0x3Fu);
      i += 2;
    } else {
      return std::nullopt;  // three- and four-byte characters are outside the alphabet
    }
    if (cp >= t.byte_of.size() || t.byte_of[cp] < 0) return std::nullopt;
    out.push_back(static_cast<char>(t.byte_of[cp]));
  }
  return out;
}

std::string byte_level_encode(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (const char c : bytes) out.append(byte_level_char(static_cast<uint8_t>(c)));
  return out;
}

}  // namespace aerie
