#include "fuzz_mutator.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <fstream>
#include <stdexcept>

namespace aerie::fuzz {
namespace {

// Tokens every target gets: JSON structure, escapes, broken and 4-byte UTF-8, NUL.
const std::array<const char*, 18> kBuiltinTokens = {
    "{", "}", "[", "]", "\"", ":", ",", "\\", "\\u0000", "\\ud800", "null", "true", "\n", " ", "\xff", "\xc3",
    "\xf0\x9f\x98\x80", "<|"};

// Integers at the edges of the types parsers convert to (and a few floats), as text.
const std::array<const char*, 30> kTextIntegers = {
    "0", "-1", "1", "-0", "127", "128", "255", "256", "65535", "65536", "2147483647", "2147483648",
    "-2147483648", "-2147483649", "4294967295", "4294967296", "2305843009213693952", "9223372036854775807",
    "9223372036854775808", "-9223372036854775808", "-9223372036854775809", "18446744073709551615",
    "18446744073709551616", "99999999999999999999999", "1e308", "1e309", "-1e309", "1e-400", "0.5", "3.0"};

// The same edges as raw bytes (written 1, 2, 4 or 8 bytes wide).
const std::array<uint64_t, 15> kBinaryIntegers = {
    0, 1, 0x7f, 0x80, 0xff, 0x7fff, 0x8000, 0xffff, 0x7fffffff, 0x80000000, 0xffffffff, 0x7fffffffffffffff,
    0x8000000000000000, ~uint64_t{0}, ~uint64_t{0} - 1};

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The bytes between the first and last '"' of a dictionary line, escapes undone.
Bytes parse_token(const std::string& line, const std::string& where) {
  const size_t open = line.find('"');
  const size_t close = line.rfind('"');
  if (open == std::string::npos || close == open) throw std::runtime_error(where + ": expected \"token\"");
  Bytes out;
  for (size_t i = open + 1; i < close; ++i) {
    if (line[i] != '\\') {
      out.push_back(uint8_t(line[i]));
      continue;
    }
    if (i + 1 >= close) throw std::runtime_error(where + ": dangling backslash");
    const char next = line[++i];
    if (next == '\\' || next == '"') {
      out.push_back(uint8_t(next));
      continue;
    }
    if (next != 'x') throw std::runtime_error(where + ": only \\\\, \\\" and \\xNN escapes (as libFuzzer)");
    const int high = i + 2 < close ? hex_digit(line[i + 1]) : -1;
    const int low = i + 2 < close ? hex_digit(line[i + 2]) : -1;
    if (high < 0 || low < 0) throw std::runtime_error(where + ": bad \\x escape");
    out.push_back(uint8_t(high * 16 + low));
    i += 2;
  }
  return out;
}

Bytes bytes_of(const char* text) { return Bytes(text, text + std::strlen(text)); }

bool is_digit(uint8_t c) { return c >= '0' && c <= '9'; }

}  // namespace

std::vector<Bytes> read_dictionary(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open dictionary " + path);
  std::vector<Bytes> tokens;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    const size_t start = line.find_first_not_of(" \t\r");
    if (start == std::string::npos || line[start] == '#') continue;
    Bytes token = parse_token(line, path + ":" + std::to_string(number));
    if (!token.empty()) tokens.push_back(std::move(token));
  }
  return tokens;
}

Mutator::Mutator(uint64_t seed, std::vector<Bytes> dictionary) : rng_(seed), dictionary_(std::move(dictionary)) {
  for (const char* token : kBuiltinTokens) dictionary_.push_back(bytes_of(token));
}

void Mutator::mutate(Bytes& input, const Bytes& other, size_t max_len) {
  // 1 mutation half the time, 2 a quarter, ... up to 16: mostly near the seed, sometimes far from it.
  int count = 1;
  while (count < 16 && below(2) == 0) ++count;
  for (int i = 0; i < count; ++i) mutate_once(input, other, max_len);
  if (input.size() > max_len) input.resize(max_len);
}

void Mutator::mutate_once(Bytes& input, const Bytes& other, size_t max_len) {
  if (input.empty()) {
    insert_token(input, max_len);
    return;
  }
  switch (below(11)) {
    case 0: change_bytes(input); break;
    case 1: insert_bytes(input, max_len); break;
    case 2: erase_range(input); break;
    case 3: duplicate_range(input, max_len); break;
    case 4: splice(input, other, max_len); break;
    case 5: insert_token(input, max_len); break;
    case 6: overwrite_token(input); break;
    case 7: repeat_token(input, max_len); break;
    case 8: text_integer(input, max_len); break;
    case 9: binary_integer(input); break;
    default: insert_token(input, max_len); break;  // the most productive kind, twice as often
  }
}

void Mutator::change_bytes(Bytes& input) {
  const size_t at = below(input.size());
  switch (below(3)) {
    case 0: input[at] ^= uint8_t(1u << below(8)); break;
    case 1: input[at] = uint8_t(below(256)); break;
    default: input[at] = uint8_t(input[at] + (below(2) ? 1 : -1)); break;
  }
}

void Mutator::insert_bytes(Bytes& input, size_t max_len) {
  if (input.size() >= max_len) return;
  const size_t at = below(input.size() + 1);
  // A few random bytes, or one byte repeated (long runs of a character).
  const size_t n = std::min(max_len - input.size(), below(2) ? 1 + below(4) : 1 + below(256));
  const uint8_t repeated = uint8_t(below(256));
  const bool random = below(2);
  Bytes bytes(n, repeated);
  if (random) for (uint8_t& b : bytes) b = uint8_t(below(256));
  input.insert(input.begin() + ptrdiff_t(at), bytes.begin(), bytes.end());
}

void Mutator::erase_range(Bytes& input) {
  const size_t at = below(input.size());
  const size_t n = 1 + below(std::min<size_t>(input.size() - at, below(4) ? 8 : input.size()));
  input.erase(input.begin() + ptrdiff_t(at), input.begin() + ptrdiff_t(at + n));
}

void Mutator::duplicate_range(Bytes& input, size_t max_len) {
  if (input.size() >= max_len) return;
  const size_t from = below(input.size());
  const size_t n = std::min(1 + below(std::min<size_t>(input.size() - from, 64)), max_len - input.size());
  const Bytes chunk(input.begin() + ptrdiff_t(from), input.begin() + ptrdiff_t(from + n));
  const size_t at = below(input.size() + 1);
  input.insert(input.begin() + ptrdiff_t(at), chunk.begin(), chunk.end());
}

void Mutator::splice(Bytes& input, const Bytes& other, size_t max_len) {
  if (other.empty()) {
    duplicate_range(input, max_len);
    return;
  }
  if (below(2)) {
    // Crossover: a prefix of this input, then a suffix of the other.
    const size_t keep = below(input.size() + 1);
    const size_t from = below(other.size());
    input.resize(keep);
    input.insert(input.end(), other.begin() + ptrdiff_t(from), other.end());
    return;
  }
  // A chunk of the other input inserted somewhere in this one.
  const size_t from = below(other.size());
  const size_t n = 1 + below(std::min<size_t>(other.size() - from, 512));
  const size_t at = below(input.size() + 1);
  input.insert(input.begin() + ptrdiff_t(at), other.begin() + ptrdiff_t(from), other.begin() + ptrdiff_t(from + n));
}

const Bytes& Mutator::random_token() { return dictionary_[below(dictionary_.size())]; }

void Mutator::insert_token(Bytes& input, size_t max_len) {
  const Bytes& token = random_token();
  if (input.size() + token.size() > max_len) return;
  const size_t at = below(input.size() + 1);
  input.insert(input.begin() + ptrdiff_t(at), token.begin(), token.end());
}

void Mutator::overwrite_token(Bytes& input) {
  const Bytes& token = random_token();
  if (token.size() > input.size()) return;
  const size_t at = below(input.size() - token.size() + 1);
  std::copy(token.begin(), token.end(), input.begin() + ptrdiff_t(at));
}

void Mutator::repeat_token(Bytes& input, size_t max_len) {
  // Deep nesting ("[[[[", "{% if %}" x 300) and long runs reach the depth and size limits.
  const Bytes& token = random_token();
  const size_t times = size_t(1) << below(11);  // 1 .. 1024
  Bytes run;
  for (size_t i = 0; i < times && input.size() + run.size() + token.size() <= max_len; ++i) {
    run.insert(run.end(), token.begin(), token.end());
  }
  const size_t at = below(input.size() + 1);
  input.insert(input.begin() + ptrdiff_t(at), run.begin(), run.end());
}

void Mutator::text_integer(Bytes& input, size_t max_len) {
  // The digit run at or after a random position (with its sign) becomes an edge value; no digits: insert.
  size_t begin = below(input.size());
  while (begin < input.size() && !is_digit(input[begin])) ++begin;
  size_t end = begin;
  while (end < input.size() && is_digit(input[end])) ++end;
  if (begin > 0 && begin < input.size() && input[begin - 1] == '-') --begin;
  const Bytes number = bytes_of(kTextIntegers[below(kTextIntegers.size())]);
  if (input.size() - (end - begin) + number.size() > max_len) return;
  input.erase(input.begin() + ptrdiff_t(begin), input.begin() + ptrdiff_t(end));
  input.insert(input.begin() + ptrdiff_t(begin), number.begin(), number.end());
}

void Mutator::binary_integer(Bytes& input) {
  const size_t width = size_t(1) << below(4);  // 1, 2, 4, 8
  if (input.size() < width) return;
  const size_t at = below(input.size() - width + 1);
  uint64_t value = kBinaryIntegers[below(kBinaryIntegers.size())];
  if (below(4) == 0) {
    // The value already there, nudged (a length off by a few).
    value = 0;
    for (size_t i = 0; i < width; ++i) value |= uint64_t(input[at + i]) << (8 * i);
    value += uint64_t(int64_t(below(33)) - 16);
  }
  const bool big_endian = below(4) == 0;
  for (size_t i = 0; i < width; ++i) {
    const size_t shift = 8 * (big_endian ? width - 1 - i : i);
    input[at + i] = uint8_t(value >> shift);
  }
}

}  // namespace aerie::fuzz
