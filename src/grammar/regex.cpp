// The regex compiler's back end (regex.h): RegexAst -> NFA over bytes -> DFA (subset construction over byte
// classes) -> live states only -> Moore-minimised, with each state's completion lengths.
#include "grammar/regex.h"

#include <algorithm>
#include <map>
#include <unordered_map>
#include <tuple>

#include "core/error.h"

namespace aerie {
namespace {

// One UTF-8 byte-range sequence: the code points whose encodings have n bytes, byte i in [lo[i], hi[i]].
struct Utf8Sequence {
  int n = 0;
  uint8_t lo[4] = {}, hi[4] = {};
};

int encode_utf8(uint32_t cp, uint8_t out[4]) {
  if (cp < 0x80) {
    out[0] = uint8_t(cp);
    return 1;
  }
  if (cp < 0x800) {
    out[0] = uint8_t(0xC0 | (cp >> 6));
    out[1] = uint8_t(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    out[0] = uint8_t(0xE0 | (cp >> 12));
    out[1] = uint8_t(0x80 | ((cp >> 6) & 0x3F));
    out[2] = uint8_t(0x80 | (cp & 0x3F));
    return 3;
  }
  out[0] = uint8_t(0xF0 | (cp >> 18));
  out[1] = uint8_t(0x80 | ((cp >> 12) & 0x3F));
  out[2] = uint8_t(0x80 | ((cp >> 6) & 0x3F));
  out[3] = uint8_t(0x80 | (cp & 0x3F));
  return 4;
}

// Splits [lo, hi] (surrogates skipped) into sequences whose byte ranges are independent: every combination
// of bytes within the ranges is the encoding of a code point in [lo, hi]. Split first where the encoded
// length changes, then where a range crosses a multiple of 64^i but does not cover whole blocks of it.
void split_utf8(uint32_t lo, uint32_t hi, std::vector<Utf8Sequence>& out) {
  if (lo > hi) return;
  if (lo <= 0xDFFF && hi >= 0xD800) {
    if (lo < 0xD800) split_utf8(lo, 0xD7FF, out);
    if (hi > 0xDFFF) split_utf8(0xE000, hi, out);
    return;
  }
  static constexpr uint32_t kLastOfLength[3] = {0x7F, 0x7FF, 0xFFFF};
  for (const uint32_t last : kLastOfLength)
    if (lo <= last && hi > last) {
      split_utf8(lo, last, out);
      split_utf8(last + 1, hi, out);
      return;
    }
  Utf8Sequence s;
  s.n = lo < 0x80 ? 1 : lo < 0x800 ? 2 : lo < 0x10000 ? 3 : 4;
  for (int i = 1; i < s.n; ++i) {
    const uint32_t m = (uint32_t(1) << (6 * i)) - 1;
    if ((lo & ~m) == (hi & ~m)) continue;
    if ((lo & m) != 0) {
      split_utf8(lo, lo | m, out);
      split_utf8((lo | m) + 1, hi, out);
      return;
    }
    if ((hi & m) != m) {
      split_utf8(lo, (hi & ~m) - 1, out);
      split_utf8(hi & ~m, hi, out);
      return;
    }
  }
  encode_utf8(lo, s.lo);
  encode_utf8(hi, s.hi);
  out.push_back(s);
}

constexpr uint32_t kNone = 0xffffffffu;

struct NfaState {
  uint8_t lo = 1, hi = 0;  // the byte edge's range (empty when lo > hi)
  uint32_t next = kNone;
  std::vector<uint32_t> epsilon;
};

class NfaBuilder {
 public:
  NfaBuilder(const RegexAst& ast, const RegexLimits& limits, const std::string& name)
      : ast_(ast), limits_(limits), name_(name) {}

  std::vector<NfaState> build(uint32_t& start, uint32_t& accept) {
    const auto [s, e] = fragment(ast_.root);
    start = s;
    accept = e;
    return std::move(states_);
  }

 private:
  struct Fragment {
    uint32_t start, end;
  };

  uint32_t add() {
    AERIE_CHECK(states_.size() < limits_.max_nfa_states, "regex /", name_, "/: too large (more than ",
                limits_.max_nfa_states, " automaton states after counted repetitions are expanded)");
    states_.emplace_back();
    return uint32_t(states_.size() - 1);
  }
  void link(uint32_t from, uint32_t to) { states_[from].epsilon.push_back(to); }

  Fragment fragment(uint32_t id) {
    const RegexNode& n = ast_.nodes[id];
    switch (n.kind) {
      case RegexNode::Kind::kEmpty: {
        const uint32_t s = add();
        return {s, s};
      }
      case RegexNode::Kind::kSet: return set(n.set);
      case RegexNode::Kind::kConcat: {
        const uint32_t s = add();
        uint32_t end = s;
        for (const uint32_t child : n.children) {
          const Fragment f = fragment(child);
          link(end, f.start);
          end = f.end;
        }
        return {s, end};
      }
      case RegexNode::Kind::kAlternation: {
        const uint32_t s = add(), e = add();
        for (const uint32_t child : n.children) {
          const Fragment f = fragment(child);
          link(s, f.start);
          link(f.end, e);
        }
        return {s, e};
      }
      case RegexNode::Kind::kRepeat: return repeat(n.children[0], n.min, n.max);
    }
    return {add(), add()};
  }

  // A code point set: its UTF-8 byte-range sequences, built from the end so that sequences sharing a tail
  // (e.g. [80-BF][80-BF] -> end) share its states, which keeps closures over large classes small.
  Fragment set(const RegexRanges& ranges) {
    const uint32_t s = add(), e = add();
    std::vector<Utf8Sequence> sequences;
    for (const auto& [lo, hi] : ranges) split_utf8(lo, hi, sequences);
    std::map<std::tuple<uint8_t, uint8_t, uint32_t>, uint32_t> shared;  // (lo, hi, target) -> state
    for (const Utf8Sequence& q : sequences) {
      uint32_t to = e;
      for (int i = q.n - 1; i >= 0; --i) {
        const auto key = std::make_tuple(q.lo[i], q.hi[i], to);
        auto it = shared.find(key);
        if (it == shared.end()) {
          const uint32_t from = add();
          states_[from].lo = q.lo[i];
          states_[from].hi = q.hi[i];
          states_[from].next = to;
          it = shared.emplace(key, from).first;
          if (i == 0) link(s, from);
        }
        to = it->second;
      }
    }
    return {s, e};
  }

  // x{min,max}: min copies, then either a loop (no max) or max - min optional copies.
  Fragment repeat(uint32_t child, uint32_t min, uint32_t max) {
    const uint32_t s = add();
    uint32_t end = s;
    for (uint32_t i = 0; i < min; ++i) {
      const Fragment f = fragment(child);
      link(end, f.start);
      end = f.end;
    }
    if (max == kRegexUnboundedLength) {
      const uint32_t loop = add();
      const Fragment f = fragment(child);
      link(end, loop);
      link(loop, f.start);
      link(f.end, loop);
      return {s, loop};
    }
    for (uint32_t i = min; i < max; ++i) {
      const Fragment f = fragment(child);
      const uint32_t after = add();
      link(end, f.start);
      link(end, after);
      link(f.end, after);
      end = after;
    }
    return {s, end};
  }

  const RegexAst& ast_;
  const RegexLimits& limits_;
  const std::string& name_;
  std::vector<NfaState> states_;
};

}  // namespace

// Builds a RegexDfa's tables (a friend of RegexDfa).
class RegexDfaBuilder {
 public:
  RegexDfaBuilder(std::string_view pattern, const RegexLimits& limits) : limits_(limits) {
    dfa_.pattern_ = std::string(pattern.substr(0, 200)) + (pattern.size() > 200 ? "..." : "");
  }

  RegexDfa build(const RegexAst& ast) {
    NfaBuilder nfa_builder(ast, limits_, dfa_.pattern_);
    nfa_ = nfa_builder.build(nfa_start_, nfa_accept_);
    make_byte_classes();
    determinise();
    keep_live_states();
    if (!dfa_.empty()) minimise();
    completion_lengths();
    dfa_.compile_work_ = work_;
    return std::move(dfa_);
  }

 private:
  [[noreturn]] void too_complex(const char* what) const {
    throw_error(str_cat("regex /", dfa_.pattern_, "/: too complex: ", what));
  }

  // Bytes that no edge tells apart share a class; 0x80 and 0xC0 start classes of their own so that a class
  // never mixes UTF-8 continuation bytes with others (completion lengths count characters).
  void make_byte_classes() {
    bool boundary[257] = {};
    boundary[0] = boundary[0x80] = boundary[0xC0] = true;
    for (const NfaState& s : nfa_)
      if (s.lo <= s.hi) boundary[s.lo] = boundary[s.hi + 1] = true;
    uint32_t n = 0;
    for (int b = 0; b < 256; ++b) {
      if (boundary[b] && b > 0) ++n;
      dfa_.byte_class_[b] = uint8_t(n);
      if (b == 0 || boundary[b]) representative_.push_back(uint8_t(b));
    }
    dfa_.n_classes_ = n + 1;
  }

  // The epsilon closure of `set`, keeping only states with a byte edge or the accepting one (sorted).
  std::vector<uint32_t> closure(std::vector<uint32_t> stack) {
    ++generation_;
    if (mark_.size() < nfa_.size()) mark_.assign(nfa_.size(), 0);
    std::vector<uint32_t> out;
    for (const uint32_t s : stack) mark_[s] = generation_;
    while (!stack.empty()) {
      const uint32_t s = stack.back();
      stack.pop_back();
      const NfaState& st = nfa_[s];
      if (st.lo <= st.hi || s == nfa_accept_) out.push_back(s);
      for (const uint32_t t : st.epsilon)
        if (mark_[t] != generation_) {
          mark_[t] = generation_;
          stack.push_back(t);
        }
      work_ += 1 + st.epsilon.size();
    }
    if (work_ > limits_.max_subset_work) too_complex("the subset construction passes its work budget");
    std::sort(out.begin(), out.end());
    return out;
  }

  uint32_t intern(std::vector<uint32_t> set) {
    if (set.empty()) return kRegexDead;
    const auto [it, inserted] = ids_.emplace(std::move(set), uint32_t(sets_.size()));
    if (inserted) {
      if (sets_.size() >= limits_.max_dfa_states)
        throw_error(str_cat("regex /", dfa_.pattern_, "/: needs more than ", limits_.max_dfa_states,
                            " automaton states (nested or unanchored counted repetitions, e.g. a.{20} in a search)"));
      sets_.push_back(&it->first);
    }
    return it->second;
  }

  void determinise() {
    const uint32_t n_classes = dfa_.n_classes_;
    intern(closure({nfa_start_}));
    std::vector<std::vector<uint32_t>> moved(n_classes);
    for (size_t d = 0; d < sets_.size(); ++d) {
      // Each NFA state's byte edge feeds the classes its range covers (ranges are unions of classes).
      for (auto& m : moved) m.clear();
      for (const uint32_t s : *sets_[d]) {
        const NfaState& st = nfa_[s];
        if (st.lo > st.hi) continue;
        for (uint32_t c = dfa_.byte_class_[st.lo]; c <= dfa_.byte_class_[st.hi]; ++c) moved[c].push_back(st.next);
        work_ += 1 + dfa_.byte_class_[st.hi] - dfa_.byte_class_[st.lo];
      }
      for (uint32_t c = 0; c < n_classes; ++c)
        table_.push_back(moved[c].empty() ? kRegexDead : intern(closure(moved[c])));
    }
    accepting_.resize(sets_.size());
    for (size_t d = 0; d < sets_.size(); ++d)
      accepting_[d] = std::binary_search(sets_[d]->begin(), sets_[d]->end(), nfa_accept_);
  }

  // Drops the states from which no accepting state is reachable (edges to them become kRegexDead) and
  // those the start cannot reach.
  void keep_live_states() {
    const size_t n = accepting_.size(), n_classes = dfa_.n_classes_;
    std::vector<std::vector<uint32_t>> predecessors(n);
    for (size_t s = 0; s < n; ++s)
      for (size_t c = 0; c < n_classes; ++c)
        if (const uint32_t t = table_[s * n_classes + c]; t != kRegexDead) predecessors[t].push_back(uint32_t(s));
    std::vector<uint8_t> live(n, 0);
    std::vector<uint32_t> stack;
    for (size_t s = 0; s < n; ++s)
      if (accepting_[s]) live[s] = 1, stack.push_back(uint32_t(s));
    while (!stack.empty()) {
      const uint32_t t = stack.back();
      stack.pop_back();
      for (const uint32_t s : predecessors[t])
        if (!live[s]) live[s] = 1, stack.push_back(s);
    }
    // Renumber in breadth-first order from the start (state 0), live states only.
    std::vector<uint32_t> id(n, kRegexDead), order;
    if (n > 0 && live[0]) id[0] = 0, order.push_back(0);
    for (size_t i = 0; i < order.size(); ++i)
      for (size_t c = 0; c < n_classes; ++c) {
        const uint32_t t = table_[order[i] * n_classes + c];
        if (t != kRegexDead && live[t] && id[t] == kRegexDead) {
          id[t] = uint32_t(order.size());
          order.push_back(t);
        }
      }
    dfa_.table_.assign(order.size() * n_classes, kRegexDead);
    dfa_.accepting_.assign(order.size(), 0);
    for (size_t i = 0; i < order.size(); ++i) {
      dfa_.accepting_[i] = accepting_[order[i]];
      for (size_t c = 0; c < n_classes; ++c) {
        const uint32_t t = table_[order[i] * n_classes + c];
        dfa_.table_[i * n_classes + c] = t == kRegexDead ? kRegexDead : id[t];
      }
    }
  }

  // Moore's partition refinement: states with the same acceptance whose every class leads to the same
  // block are merged, until no block splits. Skipped (the DFA is correct as it is) past its work budget.
  void minimise() {
    const size_t n = dfa_.n_states(), n_classes = dfa_.n_classes_;
    std::vector<uint32_t> block(n);
    for (size_t s = 0; s < n; ++s) block[s] = dfa_.accepting_[s];
    size_t n_blocks = 0, work = 0;
    std::vector<uint32_t> signature(n_classes + 1);
    for (;;) {
      std::map<std::vector<uint32_t>, uint32_t> ids;
      std::vector<uint32_t> next_block(n);
      for (size_t s = 0; s < n; ++s) {
        signature[0] = block[s];
        for (size_t c = 0; c < n_classes; ++c) {
          const uint32_t t = dfa_.table_[s * n_classes + c];
          signature[c + 1] = t == kRegexDead ? kRegexDead : block[t];
        }
        next_block[s] = ids.emplace(signature, uint32_t(ids.size())).first->second;
      }
      work += n * n_classes;
      if (work > limits_.max_minimise_work) return;
      block = std::move(next_block);
      if (ids.size() == n_blocks) break;
      n_blocks = ids.size();
    }
    if (n_blocks == n) return;
    // Blocks renumbered so that the start's is 0; each block keeps its first state's row.
    std::vector<uint32_t> id(n_blocks, kRegexDead), first(n_blocks, kRegexDead);
    uint32_t next_id = 0;
    for (size_t s = 0; s < n; ++s)
      if (id[block[s]] == kRegexDead) id[block[s]] = next_id++, first[id[block[s]]] = uint32_t(s);
    std::vector<uint32_t> table(n_blocks * n_classes);
    std::vector<uint8_t> accepting(n_blocks);
    for (size_t b = 0; b < n_blocks; ++b) {
      accepting[b] = dfa_.accepting_[first[b]];
      for (size_t c = 0; c < n_classes; ++c) {
        const uint32_t t = dfa_.table_[first[b] * n_classes + c];
        table[b * n_classes + c] = t == kRegexDead ? kRegexDead : id[block[t]];
      }
    }
    dfa_.table_ = std::move(table);
    dfa_.accepting_ = std::move(accepting);
  }

  // min_chars by a backward 0-1 breadth-first search from the accepting states; max_chars by peeling
  // states whose successors are all known (those never peeled reach a loop: unbounded).
  void completion_lengths() {
    const size_t n = dfa_.n_states(), n_classes = dfa_.n_classes_;
    struct Edge {
      uint32_t from;
      uint32_t cost;
    };
    std::vector<std::vector<Edge>> predecessors(n);
    std::vector<uint32_t> n_unknown(n, 0);
    dfa_.can_continue_.assign(n, 0);
    for (size_t s = 0; s < n; ++s)
      for (size_t c = 0; c < n_classes; ++c)
        if (const uint32_t t = dfa_.table_[s * n_classes + c]; t != kRegexDead) {
          const uint32_t cost = (representative_[c] & 0xC0) != 0x80;
          predecessors[t].push_back(Edge{uint32_t(s), cost});
          ++n_unknown[s];
          dfa_.can_continue_[s] = 1;
        }
    dfa_.min_chars_.assign(n, kRegexUnboundedLength);
    std::vector<uint32_t> queue;
    for (size_t s = 0; s < n; ++s)
      if (dfa_.accepting_[s]) dfa_.min_chars_[s] = 0, queue.push_back(uint32_t(s));
    // Dijkstra over costs 0 and 1 with a simple deque (as two vectors: this level and the next).
    for (uint32_t level = 0; !queue.empty(); ++level) {
      std::vector<uint32_t> next_level;
      for (size_t i = 0; i < queue.size(); ++i) {
        const uint32_t t = queue[i];
        if (dfa_.min_chars_[t] != level) continue;
        for (const Edge& e : predecessors[t]) {
          const uint32_t d = level + e.cost;
          if (d >= dfa_.min_chars_[e.from]) continue;
          dfa_.min_chars_[e.from] = d;
          (e.cost == 0 ? queue : next_level).push_back(e.from);
        }
      }
      queue = std::move(next_level);
    }
    dfa_.max_chars_.assign(n, 0);
    std::vector<uint8_t> known(n, 0);
    for (size_t s = 0; s < n; ++s)
      if (n_unknown[s] == 0) queue.push_back(uint32_t(s));
    while (!queue.empty()) {
      const uint32_t t = queue.back();
      queue.pop_back();
      known[t] = 1;
      for (const Edge& e : predecessors[t]) {
        dfa_.max_chars_[e.from] = std::max(dfa_.max_chars_[e.from], dfa_.max_chars_[t] + e.cost);
        if (--n_unknown[e.from] == 0) queue.push_back(e.from);
      }
    }
    for (size_t s = 0; s < n; ++s)
      if (!known[s]) dfa_.max_chars_[s] = kRegexUnboundedLength;
  }

 public:
  // The product of two automata (both must accept): states are pairs, classes the common refinement of
  // theirs.
  RegexDfa build_intersection(const RegexDfa& a, const RegexDfa& b) {
    std::map<std::pair<uint32_t, uint32_t>, uint32_t> class_ids;
    for (int byte = 0; byte < 256; ++byte) {
      const auto key = std::make_pair(uint32_t(a.byte_class_[byte]), uint32_t(b.byte_class_[byte]));
      const auto [it, inserted] = class_ids.emplace(key, uint32_t(class_ids.size()));
      if (inserted) representative_.push_back(uint8_t(byte));
      dfa_.byte_class_[byte] = uint8_t(it->second);
    }
    dfa_.n_classes_ = uint32_t(class_ids.size());
    std::map<std::pair<uint32_t, uint32_t>, uint32_t> ids;
    std::vector<std::pair<uint32_t, uint32_t>> pairs;
    auto intern_pair = [&](uint32_t x, uint32_t y) {
      if (x == kRegexDead || y == kRegexDead) return kRegexDead;
      const auto [it, inserted] = ids.emplace(std::make_pair(x, y), uint32_t(pairs.size()));
      if (inserted) {
        if (pairs.size() >= limits_.max_dfa_states)
          throw_error(
              str_cat("regex /", dfa_.pattern_, "/: needs more than ", limits_.max_dfa_states, " automaton states"));
        pairs.emplace_back(x, y);
      }
      return it->second;
    };
    if (!a.empty() && !b.empty()) intern_pair(a.start(), b.start());
    for (size_t i = 0; i < pairs.size(); ++i) {
      const auto [x, y] = pairs[i];
      accepting_.push_back(a.accepting(x) && b.accepting(y));
      for (uint32_t c = 0; c < dfa_.n_classes_; ++c)
        table_.push_back(intern_pair(a.next(x, representative_[c]), b.next(y, representative_[c])));
    }
    keep_live_states();
    if (!dfa_.empty()) minimise();
    completion_lengths();
    return std::move(dfa_);
  }

 private:
  const RegexLimits& limits_;
  RegexDfa dfa_;
  std::vector<NfaState> nfa_;
  uint32_t nfa_start_ = 0, nfa_accept_ = 0;
  std::vector<uint8_t> representative_;  // [n_classes]: a byte of each class
  struct SetHash {
    size_t operator()(const std::vector<uint32_t>& v) const {
      uint64_t h = 0x9E3779B97F4A7C15ull ^ v.size();
      for (const uint32_t x : v) h = (h ^ x) * 0x100000001B3ull;
      return size_t(h ^ (h >> 29));
    }
  };
  std::unordered_map<std::vector<uint32_t>, uint32_t, SetHash> ids_;  // node-based: keys stay put
  std::vector<const std::vector<uint32_t>*> sets_;                    // [DFA states]: the NFA states of each
  std::vector<uint32_t> table_;                                       // [DFA states, n_classes] before trimming
  std::vector<uint8_t> accepting_;
  std::vector<uint32_t> mark_;
  uint32_t generation_ = 0;
  size_t work_ = 0;
};

uint32_t RegexDfa::step_code_point(uint32_t state, uint32_t cp) const {
  uint8_t bytes[4];
  const int n = encode_utf8(cp, bytes);
  for (int i = 0; i < n && state != kRegexDead; ++i) state = next(state, bytes[i]);
  return state;
}

bool RegexDfa::admits_code_points(uint32_t state, uint32_t lo, uint32_t hi,
                                  const std::function<bool(uint32_t)>& keep) const {
  if (state == kRegexDead) return false;
  std::vector<Utf8Sequence> sequences;
  split_utf8(lo, std::min<uint32_t>(hi, 0x10FFFF), sequences);
  std::vector<uint32_t> current, next_states;
  for (const Utf8Sequence& q : sequences) {
    current.assign(1, state);
    for (int i = 0; i < q.n && !current.empty(); ++i) {
      next_states.clear();
      for (const uint32_t s : current)
        for (uint32_t b = q.lo[i]; b <= q.hi[i]; ++b)
          if (const uint32_t t = next(s, uint8_t(b)); t != kRegexDead) next_states.push_back(t);
      std::sort(next_states.begin(), next_states.end());
      next_states.erase(std::unique(next_states.begin(), next_states.end()), next_states.end());
      current.swap(next_states);
    }
    for (const uint32_t s : current)
      if (!keep || keep(s)) return true;
  }
  return false;
}

bool RegexDfa::matches(std::string_view text) const {
  uint32_t state = start();
  for (const char c : text) {
    if (state == kRegexDead) return false;
    state = next(state, uint8_t(c));
  }
  return state != kRegexDead && accepting(state);
}

RegexDfa intersect_regex(const RegexDfa& a, const RegexDfa& b, const RegexLimits& limits) {
  return RegexDfaBuilder(a.pattern() + " and /" + b.pattern(), limits).build_intersection(a, b);
}

RegexDfa compile_regex(std::string_view pattern, RegexMode mode, const RegexLimits& limits) {
  const RegexAst ast = parse_regex(pattern, mode, limits);
  return RegexDfaBuilder(pattern, limits).build(ast);
}

}  // namespace aerie
