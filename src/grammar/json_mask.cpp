#include "grammar/json_mask.h"

#include <algorithm>
#include <utility>

namespace aerie {
namespace {

enum class WalkStep { kAllowed, kRefused, kOther };

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
WalkStep step_at(const JsonMatcher& state, JsonMaskScratch& s, size_t depth, uint8_t byte, bool recording,
                 uint32_t floor) {
  if (!s.light[depth - 1]) {
    s.light[depth] = 0;
    return s.states[depth - 1].advance(byte, s.states[depth]) ? WalkStep::kAllowed : WalkStep::kRefused;
  }
  const JsonLightStack& parent = s.stacks[depth - 1];
  JsonLightStack& child = s.stacks[depth];
  // The top frame alone first (string characters, digits): one frame to copy.
  JsonFrame top = state.light_top(parent);
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
      [&](size_t, size_t depth, uint8_t byte) {
        return step_at(state, s, depth, byte, false, 0) == WalkStep::kAllowed;
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
         stacks.capacity() * sizeof(JsonLightStack);
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
        const WalkStep step = step_at(state, scratch, d, byte, true, floor);
        if (step != WalkStep::kOther) return step == WalkStep::kAllowed;
        const JsonLightStack& parent = scratch.stacks[d - 1];
        if (entry.stacks.empty() || !same_light_stack(entry.stacks.back(), parent)) entry.stacks.push_back(parent);
        entry.frontier.push_back({uint32_t(node), uint32_t(entry.stacks.size() - 1)});
        return false;
      },
      [&](uint32_t first, uint32_t last) {
        if (!entry.runs.empty() && entry.runs.back().second == first) entry.runs.back().second = last;
        else entry.runs.emplace_back(first, last);
      },
      budget, plain_walk(state));
}

std::shared_ptr<JsonMaskEntry> shrunk(std::shared_ptr<JsonMaskEntry> entry) {
  entry->runs.shrink_to_fit();
  entry->frontier.shrink_to_fit();
  entry->stacks.shrink_to_fit();
  return entry;
}

// A string without a pattern: its characters depend on the phase and the room left under its bounds, not
// on which string node it is nor where. The content key says just that (node kContentNode; `below` holds
// the characters still due under minLength and the room under maxLength), so the first string of an
// output records the content walk once for all strings alike; its frontier (the closing quotes) keeps
// stacks relative to the top: `kept` counts the root frames from the top that it no longer holds, and the
// string frame's node and count are the recording's, put back by rebase_content().
constexpr uint32_t kContentNode = 0xfffffffeu;

bool keys_on_content(const JsonGrammar& g, const JsonFrame& top) {
  return top.node != kJsonNoNode && g.nodes[top.node].kind == JsonNodeKind::kString &&
         g.nodes[top.node].pattern == kJsonNoNode;
}

JsonMaskCache::Key content_key(const JsonGrammar& g, const JsonFrame& top) {
  const JsonNode& n = g.nodes[top.node];
  JsonMaskCache::Key key{top, JsonFrame{}, 0};
  key.top.node = kContentNode;
  key.top.value = 0;
  key.below.value = n.min > top.value ? n.min - top.value : 0;
  key.below.extra = n.max - top.value;
  return key;
}

JsonLightStack rebase_content(JsonLightStack stack, uint32_t depth, const JsonFrame& top) {
  stack.kept = depth - stack.kept;
  for (uint32_t i = 0; i < stack.n_own; ++i) {
    stack.own[i].node = top.node;
    stack.own[i].value += top.value;
  }
  return stack;
}

}  // namespace

void json_allowed_tokens_cached(const JsonMatcher& state, const TokenTrie& vocabulary, JsonMaskCache& cache,
                                std::vector<uint8_t>& allowed, JsonMaskScratch& scratch) {
  const JsonFrame* top = state.single_top();
  if (top == nullptr || state.finished()) return json_allowed_tokens(state, vocabulary, allowed, scratch);
  const JsonGrammar& grammar = *state.grammar();
  const size_t budget = start_walk(state, vocabulary, allowed, scratch);
  const uint32_t depth = state.light_root().kept;
  const JsonMaskCache::Key key{*top, depth >= 2 ? state.frames()[depth - 2] : JsonFrame{}, depth};
  const uint32_t floor = depth >= 2 ? depth - 2 : 0;  // the lowest root frame the key covers
  std::shared_ptr<const JsonMaskEntry> entry = cache.find(key);
  if (entry == nullptr) {
    auto recorded = std::make_shared<JsonMaskEntry>();
    if (keys_on_content(grammar, *top) && depth >= 2) {
      // From the string content's entry: its runs, and its frontier walked on with this key's floor.
      const JsonMaskCache::Key string_key = content_key(grammar, *top);
      std::shared_ptr<const JsonMaskEntry> content = cache.find(string_key);
      if (content == nullptr) {
        auto walked = std::make_shared<JsonMaskEntry>();
        record_range(state, vocabulary, 0, vocabulary.n_nodes(), depth - 1, budget, scratch, *walked);
        for (JsonLightStack& stack : walked->stacks) {
          stack.kept = depth - stack.kept;
          for (uint32_t i = 0; i < stack.n_own; ++i) stack.own[i].value -= top->value;
        }
        content = shrunk(std::move(walked));
        cache.insert(string_key, content);
      }
      recorded->runs = content->runs;
      for (const JsonMaskEntry::Frontier& f : content->frontier) {
        const size_t d = vocabulary.depth(f.node);
        scratch.stacks[d - 1] = rebase_content(content->stacks[f.stack], depth, *top);
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
