#include "engine/draft_tokens.h"

#include <sstream>

#include "core/error.h"

namespace aerie {

DraftTokensByBatchSize DraftTokensByBatchSize::parse(const std::string& text) {
  DraftTokensByBatchSize out;
  std::stringstream in(text);
  std::string item;
  auto number = [&](const std::string& s) -> int64_t {
    size_t used = 0;
    int64_t v = -1;
    try {
      v = std::stoll(s, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    AERIE_CHECK(used == s.size() && v >= 0, "draft tokens by batch size: '", s, "' in '", text, "' is not a count");
    return v;
  };
  while (std::getline(in, item, ',')) {
    const size_t colon = item.find(':'), dash = item.find('-');
    AERIE_CHECK(colon != std::string::npos && dash != std::string::npos && dash < colon,
                "draft tokens by batch size: expected LO-HI:K or LO-:K, got '", item, "'");
    Range r;
    r.lo = number(item.substr(0, dash));
    const std::string hi = item.substr(dash + 1, colon - dash - 1);
    r.hi = hi.empty() ? -1 : number(hi);
    r.k = number(item.substr(colon + 1));
    AERIE_CHECK(r.hi < 0 || r.hi >= r.lo, "draft tokens by batch size: empty range '", item, "'");
    out.ranges.push_back(r);
  }
  return out;
}

int64_t DraftTokensByBatchSize::k_for(int64_t batch_size, int64_t fallback) const {
  for (const Range& r : ranges)
    if (batch_size >= r.lo && (r.hi < 0 || batch_size <= r.hi)) return r.k;
  return fallback;
}

}  // namespace aerie
