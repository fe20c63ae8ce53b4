// K by batch size: how many tokens each decoding sequence drafts when this many sequences decode at once
// (speculation pays less as the batch fills the machine). Text form "1-4:3,5-16:2,17-:0".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace aerie {

struct DraftTokensByBatchSize {
  struct Range {
    int64_t lo, hi, k;  // hi < 0: unbounded
  };
  std::vector<Range> ranges;
  static DraftTokensByBatchSize parse(const std::string& text);
  // K for `batch_size` decoding sequences (0 = plain decoding at that size); `fallback` outside every range.
  int64_t k_for(int64_t batch_size, int64_t fallback) const;
};

}  // namespace aerie
