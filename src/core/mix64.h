// mix64: splitmix64's finaliser, for hashing token ids and bytes (n-gram and suffix tables, the disk KV
// tier's identity): every input bit reaches every output bit, and it is a bijection on 64 bits.
#pragma once

#include <cstdint>

namespace aerie {

inline uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace aerie
