#include "grammar/json_grammar.h"

#include <algorithm>

#include "grammar/json_grammar_steps.h"

namespace aerie {
namespace {

using namespace json_steps;

Step gap_whitespace(const JsonGrammar& g, JsonFrame& f) {
  if (g.whitespace == JsonWhitespace::kCompact || f.whitespace >= kJsonMaxWhitespace) return Step::kRefuse;
  ++f.whitespace;
  return Step::kConsume;
}

Step step_document(JsonFrame& f, uint8_t b, Push& push) {
  if (f.phase == kDocDone || is_whitespace(b)) return Step::kRefuse;
  f.phase = kDocDone;
  push.node = uint32_t(f.value);
  return Step::kPush;
}

uint64_t low_bits(uint32_t n) { return n >= 64 ? ~uint64_t(0) : (uint64_t(1) << n) - 1; }

// Rules of a listed object (JsonObjectRules): with properties before `position` decided and `written`
// the mask of those written, can the object still be completed — every property needed (required, or a
// dependency of one written or needed) still ahead, and a member count within [min, max] reachable? The
// count can reach every value between "only what is needed" and "everything still writable" (the
// compiler refuses member counts together with cyclic dependencies, where it could jump).
bool object_completable(const JsonGrammar& g, const JsonNode& n, uint32_t position, uint64_t written) {
  const JsonObjectRules& rules = g.object_rules[n.child];
  const uint64_t* depends = g.dependency_masks.data() + rules.dependencies;
  const uint64_t ahead = low_bits(n.count) & ~low_bits(position);
  uint64_t needed = rules.required | written;
  for (uint64_t m = needed; m != 0; m &= m - 1) needed |= depends[__builtin_ctzll(m)];
  // `never` covers written properties too: one whose dependency was pruned cannot be written at all.
  if ((needed & rules.never) != 0) return false;
  needed &= ~written;
  if ((needed & ~ahead) != 0) return false;
  uint64_t writable = needed;
  for (uint64_t m = ahead & ~rules.never; m != 0; m &= m - 1) {
    const int i = __builtin_ctzll(m);
    if ((depends[i] & ~(ahead | written)) == 0 && (depends[i] & rules.never) == 0) writable |= uint64_t(1) << i;
  }
  const auto fewest = uint32_t(__builtin_popcountll(written | needed));
  const auto most = uint32_t(__builtin_popcountll(written | writable));
  return std::max(fewest, n.min) <= std::min(most, n.max);  // some count in both ranges
}

// The keys a listed object with rules may write next: those after which it can still be completed.
uint64_t allowed_keys(const JsonGrammar& g, const JsonNode& n, const JsonFrame& f) {
  uint64_t allowed = 0;
  for (uint64_t m = low_bits(n.count) & ~low_bits(uint32_t(f.value)); m != 0; m &= m - 1) {
    const auto i = uint32_t(__builtin_ctzll(m));
    if (object_completable(g, n, i + 1, f.extra | (uint64_t(1) << i))) allowed |= uint64_t(1) << i;
  }
  return allowed;
}

bool object_can_close(const JsonGrammar& g, const JsonNode& n, const JsonFrame& f) {
  if (n.map) return f.value >= n.min;
  if (n.child == kJsonNoNode) return f.value >= n.close_from;
  return object_completable(g, n, n.count, f.extra);
}

// Whether another member may follow (after '{' or ','); for a listed object with rules, `keys` is set to
// the keys allowed next.
bool object_can_continue(const JsonGrammar& g, const JsonNode& n, const JsonFrame& f, uint64_t& keys) {
  if (n.map) return f.value < n.max;
  if (n.child == kJsonNoNode) return f.value < n.count;
  keys = allowed_keys(g, n, f);
  return keys != 0;
}

Step step_object(const JsonGrammar& g, const JsonNode& n, JsonFrame& f, uint8_t b, Push& push) {
  if (f.phase != kObjOpen && is_whitespace(b)) return gap_whitespace(g, f);
  uint64_t keys = ~uint64_t(0);
  switch (f.phase) {
    case kObjOpen:
      return b == '{' ? to_phase(f, kObjFirstKey) : Step::kRefuse;
    case kObjFirstKey:
    case kObjKey:
      if (b == '"') {
        if (!object_can_continue(g, n, f, keys)) return Step::kRefuse;
        push.node = n.map ? n.key : g.key_nodes[n.keys + f.value];
        if (push.node == kJsonNoNode) return Step::kRefuse;
        push.extra = ~keys;
        to_phase(f, kObjColon);  // the key frame's pop sets the position (see on_child_done)
        return Step::kPush;
      }
      if (b == '}' && f.phase == kObjFirstKey && object_can_close(g, n, f)) return to_phase(f, kObjClosed);
      return Step::kRefuse;
    case kObjColon:
      return b == ':' ? to_phase(f, kObjValue) : Step::kRefuse;
    case kObjValue:
      // A map counts its members when it has minProperties/maxProperties (else the frame stays the same
      // from member to member, which the mask cache keys on).
      if (n.map && counts(n)) ++f.value;
      push.node = n.map ? n.child : g.properties[n.first + f.value - 1].value;
      to_phase(f, kObjNext);
      return Step::kPush;
    case kObjNext:
      if (b == ',' && object_can_continue(g, n, f, keys)) return to_phase(f, kObjKey);
      if (b == '}' && object_can_close(g, n, f)) return to_phase(f, kObjClosed);
      return Step::kRefuse;
    default:
      return Step::kRefuse;
  }
}

// The node of item number `index` (0-based): the tuple's, then the rest's.
uint32_t array_item(const JsonGrammar& g, const JsonNode& n, uint64_t index) {
  return index < n.count ? g.tuple_items[n.first + index] : n.child;
}

Step step_array(const JsonGrammar& g, const JsonNode& n, JsonFrame& f, uint8_t b, Push& push) {
  if (f.phase != kArrOpen && is_whitespace(b)) return gap_whitespace(g, f);
  switch (f.phase) {
    case kArrOpen:
      return b == '[' ? to_phase(f, kArrFirst) : Step::kRefuse;
    case kArrFirst:
      if (b == ']') return n.min == 0 ? to_phase(f, kArrClosed) : Step::kRefuse;
      if (n.max == 0) return Step::kRefuse;
      [[fallthrough]];
    case kArrValue:
      push.node = array_item(g, n, f.value);
      // A unique array's item must not repeat a value used; the ',' that led here checked the count
      // against max.
      push.extra = n.unique ? f.extra : 0;
      if (n.count != 0 || counts(n)) ++f.value;  // the position matters to a tuple or to bounds only
      to_phase(f, kArrNext);
      return Step::kPush;
    case kArrNext:
      // A unique array's max is at most its number of values (the compiler's), so one is left here.
      if (b == ',' && f.value < n.max) return to_phase(f, kArrValue);
      if (b == ']' && f.value >= n.min) return to_phase(f, kArrClosed);
      return Step::kRefuse;
    default:
      return Step::kRefuse;
  }
}

uint64_t value_bit(int32_t value) { return uint64_t(1) << std::min(value, 63); }

// A literal ends at the frame's state, in a value the frame does not forbid.
bool literal_ends(const JsonGrammar& g, const JsonFrame& f) {
  const int32_t value = g.literal_states[f.value].value;
  return value >= 0 && (f.extra & value_bit(value)) == 0;
}

Step step_literal(const JsonGrammar& g, JsonFrame& f, uint8_t b) {
  const uint32_t target = g.literal_step(uint32_t(f.value), b);
  if (target != kJsonNoNode && (g.literal_states[target].below & ~f.extra) != 0) {
    f.value = target;
    return Step::kConsume;
  }
  return literal_ends(g, f) ? Step::kPopRetry : Step::kRefuse;
}

Step step_frame(const JsonGrammar& g, JsonFrame& f, uint8_t b, Push& push) {
  if (f.node == kJsonNoNode) return step_document(f, b, push);
  const JsonNode& n = g.nodes[f.node];
  switch (n.kind) {
    case JsonNodeKind::kObject: return step_object(g, n, f, b, push);
    case JsonNodeKind::kArray: return step_array(g, n, f, b, push);
    case JsonNodeKind::kString: return step_string(g, n, f, b);
    case JsonNodeKind::kNumber: return step_number(n, f, b);
    case JsonNodeKind::kLiteral: return step_literal(g, f, b);
    case JsonNodeKind::kAnyOf: break;  // never on a stack: push_value dispatches to an alternative
  }
  return Step::kRefuse;
}

// Complete, and no byte can extend it: popped at once, so that a finished document is seen as such.
bool is_closed(const JsonGrammar& g, const JsonFrame& f) {
  if (f.node == kJsonNoNode) return false;
  const JsonNode& n = g.nodes[f.node];
  switch (n.kind) {
    case JsonNodeKind::kObject: return f.phase == kObjClosed;
    case JsonNodeKind::kArray: return f.phase == kArrClosed;
    case JsonNodeKind::kString: return f.phase == kStrClosed;
    case JsonNodeKind::kNumber: return n.integer && f.phase == kNumZero && number_done(n, f.phase, f.value, f.extra);
    case JsonNodeKind::kLiteral: return literal_ends(g, f) && g.literal_states[f.value].n_edges == 0;
    case JsonNodeKind::kAnyOf: break;
  }
  return false;
}

// Complete but extendable (a number, an enum literal that is a prefix of another).
bool is_complete(const JsonGrammar& g, const JsonFrame& f) {
  if (f.node == kJsonNoNode) return f.phase == kDocDone;
  const JsonNode& n = g.nodes[f.node];
  if (n.kind == JsonNodeKind::kNumber) return number_done(n, f.phase, f.value, f.extra);
  if (n.kind == JsonNodeKind::kLiteral) return literal_ends(g, f);
  return false;
}

// A child frame was popped: a listed object learns which key was read (and, with rules, marks it
// written); a unique array marks the value its item used.
void on_child_done(const JsonGrammar& g, JsonFrame& parent, const JsonFrame& child) {
  if (parent.node == kJsonNoNode) return;
  const JsonNode& n = g.nodes[parent.node];
  if (n.kind == JsonNodeKind::kObject && !n.map && parent.phase == kObjColon) {
    const int32_t index = g.literal_states[child.value].value;
    parent.value = uint32_t(index) + 1;
    if (n.child != kJsonNoNode) parent.extra |= value_bit(index);
  } else if (n.kind == JsonNodeKind::kArray && n.unique) {
    parent.extra |= value_bit(g.literal_states[child.value].value);
  }
}

JsonFrame initial_frame(const JsonGrammar& g, const Push& push) {
  JsonFrame f;
  f.node = push.node;
  if (g.nodes[push.node].kind == JsonNodeKind::kLiteral) {
    f.value = g.nodes[push.node].child;
    f.extra = push.extra;
  }
  return f;
}

// The stack being forked at an anyOf value (push_value never nests, so one buffer per thread will do).
thread_local std::vector<JsonFrame> fork_stash;

}  // namespace

bool json_object_completable(const JsonGrammar& grammar, const JsonNode& object) {
  return object_completable(grammar, object, 0, 0);
}

uint32_t JsonGrammar::literal_step(uint32_t state, uint8_t byte) const {
  const JsonLiteralState& s = literal_states[state];
  const JsonLiteralEdge* begin = literal_edges.data() + s.first_edge;
  const JsonLiteralEdge* end = begin + s.n_edges;
  const JsonLiteralEdge* it =
      std::lower_bound(begin, end, byte, [](const JsonLiteralEdge& e, uint8_t b) { return e.byte < b; });
  return it != end && it->byte == byte ? it->target : kJsonNoNode;
}

JsonMatcher::JsonMatcher(const JsonGrammar& grammar) : grammar_(&grammar) {
  JsonFrame document;
  document.value = grammar.root;
  frames_.push_back(document);
  ends_.push_back(1);
}

bool JsonMatcher::advance(uint8_t byte, JsonMatcher& next) const {
  next.grammar_ = grammar_;
  next.frames_.clear();
  next.ends_.clear();
  uint32_t begin = 0;
  for (const uint32_t end : ends_) {
    const size_t base = next.frames_.size();
    next.frames_.insert(next.frames_.end(), frames_.begin() + begin, frames_.begin() + end);
    next.feed_stack(base, byte);
    begin = end;
  }
  if (next.ends_.size() > 1) next.remove_duplicate_stacks();
  return !next.ends_.empty() && next.ends_.size() <= size_t(kJsonMaxParses);
}

bool JsonMatcher::feed(uint8_t byte) {
  thread_local JsonMatcher next;
  if (!advance(byte, next)) return false;
  std::swap(frames_, next.frames_);
  std::swap(ends_, next.ends_);
  return true;
}

bool JsonMatcher::feed(std::string_view bytes) {
  JsonMatcher copy = *this;
  for (const char c : bytes)
    if (!copy.feed(uint8_t(c))) return false;
  *this = std::move(copy);
  return true;
}

// The stack frames_[base, end) takes `byte`. On success its end is recorded (forks record several); on
// refusal it is removed.
bool JsonMatcher::feed_stack(size_t base, uint8_t byte) {
  const JsonGrammar& g = *grammar_;
  for (;;) {
    Push push;
    switch (step_frame(g, frames_.back(), byte, push)) {
      case Step::kRefuse:
        frames_.resize(base);
        return false;
      case Step::kConsume:
        close_top(base);
        ends_.push_back(uint32_t(frames_.size()));
        return true;
      case Step::kPopRetry: {
        const JsonFrame child = frames_.back();
        frames_.pop_back();
        on_child_done(g, frames_.back(), child);
        break;
      }
      case Step::kPush: return push_value(base, push.node, push.extra, byte);
    }
  }
}

// Pushes a frame for `node` that takes `byte` as its first; an anyOf forks the stack once per alternative
// that may start with the byte.
bool JsonMatcher::push_value(size_t base, uint32_t node, uint64_t extra, uint8_t byte) {
  const JsonGrammar& g = *grammar_;
  if (frames_.size() - base >= size_t(kJsonMaxDepth)) {
    frames_.resize(base);
    return false;
  }
  auto push_and_step = [&](size_t stack_base, uint32_t concrete) {
    frames_.push_back(initial_frame(g, Push{concrete, extra}));
    Push unused;
    if (step_frame(g, frames_.back(), byte, unused) != Step::kConsume) {
      frames_.resize(stack_base);
      return false;
    }
    close_top(stack_base);
    ends_.push_back(uint32_t(frames_.size()));
    return true;
  };
  if (g.nodes[node].kind != JsonNodeKind::kAnyOf) return push_and_step(base, node);

  const uint32_t* offsets = g.dispatch_offsets.data() + g.nodes[node].keys;
  const uint32_t first = offsets[byte], last = offsets[byte + 1];
  if (first == last) {
    frames_.resize(base);
    return false;
  }
  if (last - first == 1) return push_and_step(base, g.dispatch_nodes[first]);
  fork_stash.assign(frames_.begin() + std::ptrdiff_t(base), frames_.end());
  frames_.resize(base);
  bool any = false;
  for (uint32_t i = first; i < last; ++i) {
    const size_t stack_base = frames_.size();
    frames_.insert(frames_.end(), fork_stash.begin(), fork_stash.end());
    any |= push_and_step(stack_base, g.dispatch_nodes[i]);
  }
  return any;
}

JsonMatcher::TopStep JsonMatcher::step_top(const JsonGrammar& grammar, JsonFrame& top, uint8_t byte) {
  // String content first, inline: the bulk of a mask walk inside a string.
  if (top.node != kJsonNoNode && grammar.nodes[top.node].kind == JsonNodeKind::kString) {
    const JsonNode& n = grammar.nodes[top.node];
    if (n.pattern != kJsonNoNode) {
      JsonFrame f = top;
      if (step_string(grammar, n, f, byte) == Step::kRefuse) return TopStep::kRefused;
      if (f.phase == kStrClosed) return TopStep::kOther;
      top = f;
      return TopStep::kTopOnly;
    }
    const uint8_t t = kStringTable.next[top.phase][byte];
    if (t == kStringRefused) return TopStep::kRefused;
    const uint8_t next = t & ~kStartsCharacter;
    if (next == kStrClosed) return top.value >= n.min ? TopStep::kOther : TopStep::kRefused;
    if (t & kStartsCharacter) {
      if (top.value >= n.max) return TopStep::kRefused;
      if (counts(n)) ++top.value;
    }
    top.phase = next;
    return TopStep::kTopOnly;
  }
  JsonFrame f = top;
  Push push;
  const Step step = step_frame(grammar, f, byte, push);
  if (step == Step::kRefuse) return TopStep::kRefused;
  if (step != Step::kConsume || is_closed(grammar, f)) return TopStep::kOther;
  top = f;
  return TopStep::kTopOnly;
}

// Mirrors feed_stack and push_value for one stack (the tests compare the masks of both paths).
JsonMatcher::TopStep JsonMatcher::step_light(JsonLightStack& s, uint8_t byte, uint32_t floor) const {
  const JsonGrammar& g = *grammar_;
  // Makes the top frame one of the stack's own, taking over the root's next one; false below `floor`.
  const auto own_top = [&] {
    if (s.n_own > 0) return true;
    if (s.kept <= floor) return false;
    s.own[s.n_own++] = frames_[--s.kept];
    return true;
  };
  // close_top: pops a closed top frame into its parent. False when the parent is below `floor`.
  const auto close_light_top = [&] {
    if (s.kept + s.n_own < 2 || !is_closed(g, s.own[s.n_own - 1])) return true;
    const JsonFrame child = s.own[--s.n_own];
    if (!own_top()) return false;
    on_child_done(g, s.own[s.n_own - 1], child);
    return true;
  };
  for (;;) {
    if (!own_top()) return TopStep::kOther;
    Push push;
    switch (step_frame(g, s.own[s.n_own - 1], byte, push)) {
      case Step::kRefuse: return TopStep::kRefused;
      case Step::kConsume: return close_light_top() ? TopStep::kTopOnly : TopStep::kOther;
      case Step::kPopRetry: {
        const JsonFrame child = s.own[--s.n_own];
        if (!own_top()) return TopStep::kOther;
        on_child_done(g, s.own[s.n_own - 1], child);
        break;
      }
      case Step::kPush: {
        if (s.kept + s.n_own >= uint32_t(kJsonMaxDepth)) return TopStep::kRefused;
        uint32_t node = push.node;
        if (g.nodes[node].kind == JsonNodeKind::kAnyOf) {
          const uint32_t* offsets = g.dispatch_offsets.data() + g.nodes[node].keys;
          if (offsets[byte] == offsets[byte + 1]) return TopStep::kRefused;
          if (offsets[byte + 1] - offsets[byte] > 1) return TopStep::kOther;
          node = g.dispatch_nodes[offsets[byte]];
        }
        if (s.n_own == kJsonLightFrames) return TopStep::kOther;
        JsonFrame& pushed = s.own[s.n_own++];
        pushed = initial_frame(g, Push{node, push.extra});
        Push unused;
        if (step_frame(g, pushed, byte, unused) != Step::kConsume) return TopStep::kRefused;
        return close_light_top() ? TopStep::kTopOnly : TopStep::kOther;
      }
    }
  }
}

void JsonMatcher::from_light(const JsonLightStack& s, JsonMatcher& out) const {
  out.grammar_ = grammar_;
  out.frames_.assign(frames_.begin(), frames_.begin() + s.kept);
  out.frames_.insert(out.frames_.end(), s.own, s.own + s.n_own);
  out.ends_.assign(1, uint32_t(out.frames_.size()));
}

size_t JsonMatcher::plain_text_budget() const {
  size_t budget = SIZE_MAX;
  for (const uint32_t end : ends_) {
    const JsonFrame& top = frames_[end - 1];
    if (top.node == kJsonNoNode) return 0;
    const JsonNode& n = grammar_->nodes[top.node];
    // A pattern admits only some text: no shortcut.
    if (n.kind != JsonNodeKind::kString || top.phase != kStrChar || n.pattern != kJsonNoNode) return 0;
    if (n.max != 0xffffffffu) budget = std::min<size_t>(budget, size_t(n.max - top.value));
  }
  return budget;
}

void JsonMatcher::close_top(size_t base) {
  if (frames_.size() - base < 2 || !is_closed(*grammar_, frames_.back())) return;
  const JsonFrame child = frames_.back();
  frames_.pop_back();
  on_child_done(*grammar_, frames_.back(), child);
}

// Alternatives that have converged (e.g. integer and number after "1,") would double the work from here.
void JsonMatcher::remove_duplicate_stacks() {
  size_t n_kept = 0;
  uint32_t begin = 0, write = 0;
  for (size_t i = 0; i < ends_.size(); ++i) {
    const uint32_t end = ends_[i], size = end - begin;
    bool duplicate = false;
    uint32_t kept_begin = 0;
    for (size_t k = 0; k < n_kept && !duplicate; ++k) {
      const uint32_t kept_end = ends_[k];
      duplicate = kept_end - kept_begin == size &&
                  std::equal(frames_.begin() + kept_begin, frames_.begin() + kept_end, frames_.begin() + begin);
      kept_begin = kept_end;
    }
    if (!duplicate) {
      std::copy(frames_.begin() + begin, frames_.begin() + end, frames_.begin() + write);
      write += size;
      ends_[n_kept++] = write;
    }
    begin = end;
  }
  frames_.resize(write);
  ends_.resize(n_kept);
}

bool JsonMatcher::accepting() const {
  uint32_t begin = 0;
  for (const uint32_t end : ends_) {
    const uint32_t depth = end - begin;
    if ((depth == 1 || depth == 2) && is_complete(*grammar_, frames_[end - 1])) return true;
    begin = end;
  }
  return false;
}

bool JsonMatcher::finished() const {
  uint32_t begin = 0;
  for (const uint32_t end : ends_) {
    if (end - begin != 1 || frames_[begin].phase != kDocDone) return false;
    begin = end;
  }
  return !ends_.empty();
}

}  // namespace aerie
