// Marker search for text that arrives in pieces: where the first whole marker starts, and how many trailing
// bytes must be held back because they could be the start of a marker that the next piece completes. Used
// by the stop-string matcher and the tool-call parsers (markers may span token boundaries).
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>

namespace aerie {

struct MarkerHit {
  size_t pos = std::string_view::npos;  // byte offset of the earliest match; npos when none
  size_t marker = 0;                    // index into `markers` of the match (the longest one on a tie)
  size_t length = 0;                    // its length in bytes
  bool found() const { return pos != std::string_view::npos; }
};

// The earliest occurrence of any non-empty marker in `text`.
MarkerHit find_first_marker(std::string_view text, std::span<const std::string> markers);

// Length of the longest suffix of `text` that is a proper prefix of some marker: the bytes that cannot be
// released yet. Example: text "ab<｜to", markers {"<｜tool▁calls▁begin｜>"} -> 5 ("<｜to" in bytes).
size_t partial_marker_suffix(std::string_view text, std::span<const std::string> markers);

// True for ' ', '\t', '\n', '\r'.
bool is_json_space(char c);

}  // namespace aerie
