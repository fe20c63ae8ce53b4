#include "grammar/json_mask.h"

#include <algorithm>
#include <utility>

#include "grammar/json_grammar_steps.h"

namespace aerie {
namespace {

enum class WalkStep { kAllowed, kRefused, kOther, kTakeAll };

TokenTrie::Step trie_step(WalkStep step) {
  return step == WalkStep::kTakeAll  ? TokenTrie::Step::kTakeAll
         : step == WalkStep::kAllowed ? TokenTrie::Step::kEnter
                                      : TokenTrie::Step::kPrune;
}

// The printable ASCII bytes (not '"' or '\\', which a JSON string reads otherwise) on which automaton
// state `state` of pattern `pattern` loops, memoised in the scratch.
const std::array<uint64_t, 2>& pattern_loop(const JsonGrammar& g, uint32_t pattern, uint32_t state,
                                            JsonMaskScratch& s) {
  if (s.loops_of != &g) {
    s.loops.assign(g.patterns.size(), {});
    s.loops_of = &g;
  }
  std::vector<JsonMaskScratch::Loop>& loops = s.loops[pattern];
  if (loops.empty()) loops.resize(g.patterns[pattern].n_states());
  JsonMaskScratch::Loop& loop = loops[state];
  if (!loop.known) {
    const RegexDfa& dfa = g.patterns[pattern];
    for (unsigned b = 0x20; b < 0x7f; ++b)
      if (b != '"' && b != '\\' && dfa.next(state, uint8_t(b)) == state) loop.bytes[b / 64] |= uint64_t(1) << (b % 64);
    loop.known = true;
  }
  return loop.bytes;
}

bool same_light_stack(const JsonLightStack& a, const JsonLightStack& b) {
  return a.kept == b.kept && a.n_own == b.n_own && std::equal(a.own, a.own + a.n_own, b.own);
}

// One byte of the mask walk at trie depth `depth`, from the state at depth - 1 (scratch). The walk keeps,
// per depth, either the full state or — while the root is a single stack — a light stack over the root's
// frames (json_grammar.h: the root's bottom frames under a few of its own), so that a token's bytes cost a
// frame step each, not a copy of the stacks: string characters change the top frame only, closing a value
// and opening the next key push and pop a few frames. With `floor` (a recording walk, json_mask.h), a byte
// that would reach a root frame below it, or that needs the full state, is kOther; without, the walk
// falls back to the full state.
WalkStep step_at(const JsonMatcher& state, const TokenTrie& vocabulary, JsonMaskScratch& s, size_t node, size_t depth,
                 uint8_t byte, bool recording, uint32_t floor) {
  if (!s.light[depth - 1]) {
    s.light[depth] = 0;
    return s.states[depth - 1].advance(byte, s.states[depth]) ? WalkStep::kAllowed : WalkStep::kRefused;
  }
  const JsonLightStack& parent = s.stacks[depth - 1];
  JsonLightStack& child = s.stacks[depth];
  JsonFrame top = state.light_top(parent);
  // Inside a string with a pattern, a subtree whose bytes all keep the automaton in its state is allowed
  // whole (e.g. the letters and digits of a URI path) when its longest token fits the length bounds: the
  // state loops, so its completions are unbounded and the fewest stay min_chars.
  if (top.phase == json_steps::kStrChar && top.node != kJsonNoNode) {
    const JsonGrammar& g = *state.grammar();
    const JsonNode& n = g.nodes[top.node];
    if (n.kind == JsonNodeKind::kString && n.pattern != kJsonNoNode) {
      const RegexDfa& dfa = g.patterns[n.pattern];
      const bool fits = !json_steps::counts(n) ||
                        (dfa.max_chars(top.pattern_state) == kRegexUnboundedLength &&
                         (top.value & 0xffffffffu) + (vocabulary.subtree_depth(node) - depth + 1) +
                                 dfa.min_chars(top.pattern_state) <= n.max);
      if (fits && vocabulary.subtree_bytes_within(node, pattern_loop(g, n.pattern, top.pattern_state, s)))
        return WalkStep::kTakeAll;
    }
  }
  // The top frame alone first (string characters, digits): one frame to copy.
  switch (JsonMatcher::step_top(*state.grammar(), top, byte)) {
    case JsonMatcher::TopStep::kTopOnly:
      child.kept = parent.n_own > 0 ? parent.kept : parent.kept - 1;
      child.n_own = std::max<uint32_t>(parent.n_own, 1);
      std::copy(parent.own, parent.own + child.n_own - 1, child.own);
      child.own[child.n_own - 1] = top;
      s.light[depth] = 1;
      return WalkStep::kAllowed;
    case JsonMatcher::TopStep::kRefused:
      return WalkStep::kRefused;
    case JsonMatcher::TopStep::kOther:
      break;
  }
  child.kept = parent.kept;
  child.n_own = parent.n_own;
  std::copy(parent.own, parent.own + parent.n_own, child.own);
  switch (state.step_light(child, byte, floor)) {
    case JsonMatcher::TopStep::kTopOnly:
      s.light[depth] = 1;
      return WalkStep::kAllowed;
    case JsonMatcher::TopStep::kRefused:
      return WalkStep::kRefused;
    case JsonMatcher::TopStep::kOther:
      break;
  }
  if (recording) return WalkStep::kOther;
  state.from_light(parent, s.full_parent);
  s.light[depth] = 0;
  return s.full_parent.advance(byte, s.states[depth]) ? WalkStep::kAllowed : WalkStep::kRefused;
}

// How the walks skip plain text (TokenTrie::walk_nodes): all of it for one stack, whose bounds refuse any
// plain text past the budget exactly; parallel strings with different rooms may take longer text.
TokenTrie::Plain plain_walk(const JsonMatcher& state) {
  return state.n_stacks() == 1 ? TokenTrie::Plain::kSkipAll : TokenTrie::Plain::kSkipShallow;
}

// Sets up the walk's depth 0 from `state`, and `allowed` with the plain-text tokens the state allows for
// sure (TokenTrie::plain_text_mask; the walks skip them); returns the plain-text budget.
size_t start_walk(const JsonMatcher& state, const TokenTrie& vocabulary, std::vector<uint8_t>& allowed,
                  JsonMaskScratch& s) {
  allowed.resize(size_t(vocabulary.n_vocab()));
  const size_t budget = state.finished() ? 0 : state.plain_text_budget();
  if (budget > 0) vocabulary.plain_text_mask(budget, allowed.data());
  else std::fill(allowed.begin(), allowed.end(), uint8_t(0));
  if (state.accepting())
    for (const int32_t id : vocabulary.end_tokens()) allowed[size_t(id)] = 1;
  const size_t n_depths = vocabulary.max_depth() + 1;
  if (s.states.size() < n_depths) {
    s.states.resize(n_depths);
    s.stacks.resize(n_depths);
    s.light.resize(n_depths);
  }
  s.light[0] = state.single_top() != nullptr;
  if (s.light[0]) s.stacks[0] = state.light_root();
  else s.states[0] = state;
  return budget;
}

// The plain walk over the trie nodes [begin, end) from the state at the depth above `begin`.
void walk_range(const JsonMatcher& state, const TokenTrie& vocabulary, size_t begin, size_t end, uint8_t* allowed,
                JsonMaskScratch& s, size_t budget) {
  vocabulary.walk_nodes(
      begin, end,
      [&](size_t node, size_t depth, uint8_t byte) {
        return trie_step(step_at(state, vocabulary, s, node, depth, byte, false, 0));
      },
      [&](uint32_t first, uint32_t last) { vocabulary.allow(first, last, allowed); }, budget, plain_walk(state));
}

}  // namespace

void json_allowed_tokens(const JsonMatcher& state, const TokenTrie& vocabulary, std::vector<uint8_t>& allowed,
                         JsonMaskScratch& scratch) {
  const size_t budget = start_walk(state, vocabulary, allowed, scratch);
  if (state.finished()) return;
  walk_range(state, vocabulary, 0, vocabulary.n_nodes(), allowed.data(), scratch, budget);
}

size_t JsonMaskEntry::bytes() const {
  return sizeof(*this) + runs.capacity() * sizeof(runs[0]) + frontier.capacity() * sizeof(Frontier) +
         stacks.capacity() * sizeof(JsonLightStack) + (run_chars.capacity() + frontier_chars.capacity()) * 4;
}

size_t JsonMaskCache::Hash::operator()(const Key& k) const {
  uint64_t h = 0x9E3779B97F4A7C15ull ^ k.depth;
  for (const JsonFrame* f : {&k.top, &k.below})
    for (const uint64_t part : {uint64_t(f->node) | uint64_t(f->phase) << 32 | uint64_t(f->whitespace) << 40 |
                                    uint64_t(f->pattern_state) << 48,
                                f->value, f->extra})
      h = (h ^ part) * 0xFF51AFD7ED558CCDull;
  return size_t(h ^ (h >> 29));
}

std::shared_ptr<const JsonMaskEntry> JsonMaskCache::find(const Key& key) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = entries_.find(key);
  return it == entries_.end() ? nullptr : it->second;
}

void JsonMaskCache::insert(const Key& key, std::shared_ptr<const JsonMaskEntry> entry) {
  std::lock_guard<std::mutex> lock(mutex_);
  const size_t bytes = entry->bytes() + sizeof(Key);
  if (bytes_ + bytes > kJsonMaskCacheBytes) return;
  if (entries_.emplace(key, std::move(entry)).second) bytes_ += bytes;
}

size_t JsonMaskCache::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return entries_.size();
}

namespace {

// Records the walk over the trie nodes [begin, end) into `entry` (json_mask.h): the tokens allowed without
// reaching below root frame `floor`, as runs, and the nodes where a byte would.
void record_range(const JsonMatcher& state, const TokenTrie& vocabulary, size_t begin, size_t end, uint32_t floor,
                  size_t budget, JsonMaskScratch& scratch, JsonMaskEntry& entry) {
  vocabulary.walk_nodes(
      begin, end,
      [&](size_t node, size_t d, uint8_t byte) {
        const WalkStep step = step_at(state, vocabulary, scratch, node, d, byte, true, floor);
        if (step != WalkStep::kOther) return trie_step(step);
        const JsonLightStack& parent = scratch.stacks[d - 1];
        if (entry.stacks.empty() || !same_light_stack(entry.stacks.back(), parent)) entry.stacks.push_back(parent);
        entry.frontier.push_back({uint32_t(node), uint32_t(entry.stacks.size() - 1)});
        return TokenTrie::Step::kPrune;
      },
      [&](uint32_t first, uint32_t last) {
        if (!entry.runs.empty() && entry.runs.back().second == first) entry.runs.back().second = last;
        else entry.runs.emplace_back(first, last);
      },
      budget, plain_walk(state));
}

std::shared_ptr<JsonMaskEntry> shrunk(std::shared_ptr<JsonMaskEntry> entry) {
  entry->runs.shrink_to_fit();
  entry->run_chars.shrink_to_fit();
  entry->frontier_chars.shrink_to_fit();
  entry->frontier.shrink_to_fit();
  entry->stacks.shrink_to_fit();
  return entry;
}

// A string without a pattern, at a character boundary: which tokens may follow depends on no more than the
// room left under maxLength (plain text: TokenTrie::plain_text_mask; the other tokens that stay inside
// the string, such as escapes, by their length in characters) and, for the tokens that close it, on what
// the frames below say. So the content is walked once per cache, as a string that counts its characters
// without bounds (a grammar of its own), into an entry keyed by kContentNode: the runs of tokens that stay
// inside with the characters each adds (run_chars), and the closing quotes' nodes with the characters
// before them (frontier_chars). A real string then takes the runs that fit and walks on from the quotes
// that fit with its own frames.
constexpr uint32_t kContentNode = 0xfffffffeu;

bool is_plain_string_top(const JsonGrammar& g, const JsonFrame& top) {
  return top.node != kJsonNoNode && g.nodes[top.node].kind == JsonNodeKind::kString &&
         g.nodes[top.node].pattern == kJsonNoNode && top.phase == json_steps::kStrChar;
}

const JsonGrammar& counting_string_grammar() {
  static const JsonGrammar grammar = [] {
    JsonGrammar g;
    JsonNode string;
    string.kind = JsonNodeKind::kString;
    string.max = 0xfffffffeu;  // bounded in name only: the frame counts characters (json_steps::counts)
    g.nodes.push_back(string);
    g.paths.push_back("");
    g.root = 0;
    return g;
  }();
  return grammar;
}

std::shared_ptr<const JsonMaskEntry> string_content(const TokenTrie& vocabulary, JsonMaskCache& cache,
                                                    JsonMaskScratch& scratch) {
  JsonMaskCache::Key key;
  key.top.node = kContentNode;
  if (auto found = cache.find(key)) return found;
  JsonMatcher inside(counting_string_grammar());
  inside.feed(uint8_t('"'));
  std::vector<uint8_t> unused(size_t(vocabulary.n_vocab()));
  const size_t budget = start_walk(inside, vocabulary, unused, scratch);
  auto entry = std::make_shared<JsonMaskEntry>();
  size_t last_depth = 0;
  vocabulary.walk_nodes(
      0, vocabulary.n_nodes(),
      [&](size_t node, size_t d, uint8_t byte) {
        const WalkStep step = step_at(inside, vocabulary, scratch, node, d, byte, true, 1);
        last_depth = d;
        if (step != WalkStep::kOther) return trie_step(step);
        const JsonLightStack& parent = scratch.stacks[d - 1];  // the string frame before the quote
        entry->frontier.push_back({uint32_t(node), 0});
        entry->frontier_chars.push_back(uint32_t(inside.light_top(parent).value));
        return TokenTrie::Step::kPrune;
      },
      [&](uint32_t first, uint32_t last) {
        const auto chars = uint32_t(inside.light_top(scratch.stacks[last_depth]).value);
        if (!entry->runs.empty() && entry->runs.back().second == first && entry->run_chars.back() == chars) {
          entry->runs.back().second = last;
        } else {
          entry->runs.emplace_back(first, last);
          entry->run_chars.push_back(chars);
        }
      },
      budget, TokenTrie::Plain::kSkipAll);
  auto done = shrunk(std::move(entry));
  cache.insert(key, done);
  return done;
}

// The light stack at a closing quote's parent for the real string `top` at root depth `depth`, `chars`
// characters on.
JsonLightStack before_quote(const JsonGrammar& g, const JsonFrame& top, uint32_t depth, uint32_t chars) {
  JsonLightStack stack;
  stack.kept = depth - 1;
  stack.n_own = 1;
  stack.own[0] = top;
  if (json_steps::counts(g.nodes[top.node])) stack.own[0].value += chars;
  return stack;
}

}  // namespace

void json_allowed_tokens_cached(const JsonMatcher& state, const TokenTrie& vocabulary, JsonMaskCache& cache,
                                std::vector<uint8_t>& allowed, JsonMaskScratch& scratch) {
  const JsonFrame* top = state.single_top();
  if (top == nullptr || state.finished()) return json_allowed_tokens(state, vocabulary, allowed, scratch);
  const JsonGrammar& grammar = *state.grammar();
  const uint32_t depth = state.light_root().kept;
  const bool plain_string = is_plain_string_top(grammar, *top) && depth >= 2;
  // Computed before start_walk, which the content walk would overwrite.
  const std::shared_ptr<const JsonMaskEntry> content = plain_string ? string_content(vocabulary, cache, scratch) : nullptr;
  const size_t budget = start_walk(state, vocabulary, allowed, scratch);
  if (plain_string && json_steps::counts(grammar.nodes[top->node])) {
    // A bounded string: its key changes with every character, so it is served from the content alone.
    const uint64_t room = grammar.nodes[top->node].max - top->value;
    for (size_t r = 0; r < content->runs.size(); ++r)
      if (content->run_chars[r] <= room) vocabulary.allow(content->runs[r].first, content->runs[r].second, allowed.data());
    for (size_t q = 0; q < content->frontier.size(); ++q) {
      if (content->frontier_chars[q] > room) continue;
      const uint32_t node = content->frontier[q].node;
      const size_t d = vocabulary.depth(node);
      scratch.stacks[d - 1] = before_quote(grammar, *top, depth, content->frontier_chars[q]);
      scratch.light[d - 1] = 1;
      walk_range(state, vocabulary, node, vocabulary.subtree_end(node), allowed.data(), scratch, budget);
    }
    return;
  }
  const JsonMaskCache::Key key{*top, depth >= 2 ? state.frames()[depth - 2] : JsonFrame{}, depth};
  const uint32_t floor = depth >= 2 ? depth - 2 : 0;  // the lowest root frame the key covers
  std::shared_ptr<const JsonMaskEntry> entry = cache.find(key);
  if (entry == nullptr) {
    auto recorded = std::make_shared<JsonMaskEntry>();
    if (plain_string) {
      // An unbounded string: the content's runs, and its quotes walked on with this key's floor.
      recorded->runs = content->runs;
      for (const JsonMaskEntry::Frontier& f : content->frontier) {
        const size_t d = vocabulary.depth(f.node);
        scratch.stacks[d - 1] = before_quote(grammar, *top, depth, 0);
        scratch.light[d - 1] = 1;
        record_range(state, vocabulary, f.node, vocabulary.subtree_end(f.node), floor, budget, scratch, *recorded);
      }
    } else {
      record_range(state, vocabulary, 0, vocabulary.n_nodes(), floor, budget, scratch, *recorded);
    }
    entry = shrunk(std::move(recorded));
    cache.insert(key, entry);
  }
  for (const auto& [first, last] : entry->runs) vocabulary.allow(first, last, allowed.data());
  for (const JsonMaskEntry::Frontier& f : entry->frontier) {
    const size_t d = vocabulary.depth(f.node);
    scratch.stacks[d - 1] = entry->stacks[f.stack];
    scratch.light[d - 1] = 1;
    walk_range(state, vocabulary, f.node, vocabulary.subtree_end(f.node), allowed.data(), scratch, budget);
  }
}

}  // namespace aerie
