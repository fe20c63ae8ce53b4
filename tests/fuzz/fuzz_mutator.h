// The mutations of the in-tree fuzz driver (fuzz_driver.cpp): libFuzzer's kinds without its coverage
// feedback. Bit and byte changes, inserts, erases and duplicates of ranges, splices with another input,
// dictionary tokens (inserted, written over, or repeated to build deep nesting and long runs), and
// interesting integers written as text ("-1", "9223372036854775808") or as little/big-endian bytes (the
// length fields of safetensors, zip and pickle).
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace aerie::fuzz {

using Bytes = std::vector<uint8_t>;

// Tokens of a libFuzzer / AFL dictionary file: one `"token"` or `name="token"` per line, '#' comments,
// escapes \\ \" \xNN. Throws std::runtime_error naming the line of a malformed entry.
std::vector<Bytes> read_dictionary(const std::string& path);

class Mutator {
 public:
  Mutator(uint64_t seed, std::vector<Bytes> dictionary);

  // Applies 1 to 16 mutations (fewer more often) to `input`; the result is at most max_len bytes.
  // `other` is a second input for splices (may be empty).
  void mutate(Bytes& input, const Bytes& other, size_t max_len);

  std::mt19937_64& rng() { return rng_; }
  // A uniform index in [0, n); n > 0.
  size_t below(size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng_); }

 private:
  void mutate_once(Bytes& input, const Bytes& other, size_t max_len);
  void change_bytes(Bytes& input);
  void insert_bytes(Bytes& input, size_t max_len);
  void erase_range(Bytes& input);
  void duplicate_range(Bytes& input, size_t max_len);
  void splice(Bytes& input, const Bytes& other, size_t max_len);
  void insert_token(Bytes& input, size_t max_len);
  void overwrite_token(Bytes& input);
  void repeat_token(Bytes& input, size_t max_len);
  void text_integer(Bytes& input, size_t max_len);
  void binary_integer(Bytes& input);
  const Bytes& random_token();

  std::mt19937_64 rng_;
  std::vector<Bytes> dictionary_;  // the target's tokens plus the built-in ones
};

}  // namespace aerie::fuzz
