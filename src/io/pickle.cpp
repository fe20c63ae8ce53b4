#include "io/pickle.h"

#include <algorithm>
#include <cstring>
#include <unordered_map>

#include "core/error.h"

namespace aerie::pickle {

ValuePtr make(Kind kind) {
  auto v = std::make_shared<Value>();
  v->kind = kind;
  return v;
}

namespace {

// Stack entries and marks together; each costs a few bytes of pickle, so this bounds their memory.
constexpr size_t kMaxStack = size_t{1} << 20;
// What one memo entry costs in the hash map (node, key, pointer), charged like a value.
constexpr uint64_t kMemoEntryBytes = 64;
// What a hook's object costs (the Value and, for torch, a TensorRef or StorageRef).
constexpr uint64_t kHookObjectBytes = 256;

class Machine {
 public:
  Machine(const uint8_t* data, uint64_t size, const Hooks& hooks, const std::string& what, const LoadLimits& limits)
      : p_(data), end_(data + size), hooks_(hooks), what_(what), limits_(limits) {}

  ValuePtr run();

 private:
  [[noreturn]] void fail(const std::string& why) const { throw Error(str_cat(what_, ": pickle: ", why)); }
  // Counts what the program builds: a few bytes of pickle can copy a memoised value or string many times.
  void charge(uint64_t bytes) {
    built_ += bytes;
    if (built_ > limits_.max_pickle_memory_bytes)
      fail(str_cat("data.pkl builds more than ", limits_.max_pickle_memory_bytes, " bytes of values",
                   " (LoadLimits::max_pickle_memory_bytes)"));
  }
  ValuePtr new_value(Kind kind, uint64_t extra_bytes = 0) {
    charge(sizeof(Value) + extra_bytes);
    return make(kind);
  }
  // Makes `items` the items of `container` (appended): each becomes contained and the container one level
  // deeper than its deepest item. A container holding itself is the one cycle left to refuse: any other
  // would need a contained container to grow (see Value::contained).
  void adopt(Value& container, const std::vector<ValuePtr>& items) {
    charge(items.size() * sizeof(ValuePtr));
    for (const ValuePtr& item : items) {
      if (item.get() == &container) fail("a container would hold itself");
      item->contained = true;
      container.depth = std::max(container.depth, item->depth + 1);
    }
    if (container.depth > limits_.max_pickle_depth)
      fail(str_cat("values nest deeper than ", limits_.max_pickle_depth, " levels (LoadLimits::max_pickle_depth)"));
    container.items.insert(container.items.end(), items.begin(), items.end());
  }
  void memo_put(uint64_t key) {
    if (memo_.insert_or_assign(key, top()).second) charge(kMemoEntryBytes);
  }
  const uint8_t* take(uint64_t n) {
    if (uint64_t(end_ - p_) < n) fail("truncated");
    const uint8_t* at = p_;
    p_ += n;
    return at;
  }
  template <typename T>
  T read() {
    T v;
    std::memcpy(&v, take(sizeof(T)), sizeof(T));
    return v;
  }
  std::string read_line() {
    const uint8_t* nl = static_cast<const uint8_t*>(std::memchr(p_, '\n', size_t(end_ - p_)));
    if (nl == nullptr) fail("truncated line");
    std::string s(reinterpret_cast<const char*>(p_), size_t(nl - p_));
    p_ = nl + 1;
    return s;
  }
  ValuePtr pop() {
    if (stack_.empty() || stack_.back() == nullptr) fail("stack underflow");
    ValuePtr v = stack_.back();
    stack_.pop_back();
    return v;
  }
  ValuePtr& top() {
    if (stack_.empty() || stack_.back() == nullptr) fail("stack underflow");
    return stack_.back();
  }
  // Everything above the last MARK (nullptr on the stack), removing the mark.
  std::vector<ValuePtr> pop_mark() {
    if (marks_.empty()) fail("no MARK");
    const size_t at = marks_.back();
    marks_.pop_back();
    if (at > stack_.size()) fail("corrupt MARK");
    std::vector<ValuePtr> items(stack_.begin() + int64_t(at), stack_.end());
    stack_.resize(at);
    return items;
  }
  void push_string(uint64_t n) {
    auto v = new_value(Kind::kString, n);
    v->text.assign(reinterpret_cast<const char*>(take(n)), n);
    stack_.push_back(v);
  }
  void push_int(int64_t x) {
    auto v = new_value(Kind::kInt);
    v->integer = x;
    stack_.push_back(v);
  }
  void push_tuple(const std::vector<ValuePtr>& items) {
    auto v = new_value(Kind::kTuple);
    adopt(*v, items);
    stack_.push_back(v);
  }
  void set_items(const std::vector<ValuePtr>& kv) {
    ValuePtr& dict = top();
    if (dict->kind != Kind::kDict || kv.size() % 2) fail("SETITEMS on a non-dict");
    if (dict->contained) fail("SETITEMS on a dict that is already inside another value");
    adopt(*dict, kv);
  }
  void append_items(const std::vector<ValuePtr>& items) {
    ValuePtr& list = top();
    if (list->kind != Kind::kList) fail("APPENDS on a non-list");
    if (list->contained) fail("APPENDS on a list that is already inside another value");
    adopt(*list, items);
  }
  ValuePtr call(const ValuePtr& callable, const ValuePtr& args) {
    if (callable->kind != Kind::kGlobal || args->kind != Kind::kTuple) fail("REDUCE of a non-callable");
    ValuePtr out = hooks_.reduce ? hooks_.reduce(*callable, *args) : nullptr;
    if (out == nullptr) fail("unsupported callable '" + callable->text + "'");
    charge(kHookObjectBytes);
    return out;
  }
  bool step(uint8_t op);

  const uint8_t* p_;
  const uint8_t* end_;
  const Hooks& hooks_;
  const std::string& what_;
  const LoadLimits& limits_;
  uint64_t built_ = 0;  // bytes charged so far
  std::vector<ValuePtr> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, ValuePtr> memo_;
};

// Returns false at STOP.
bool Machine::step(uint8_t op) {
  switch (op) {
    case 0x80: take(1); break;                                         // PROTO
    case 0x95: take(8); break;                                         // FRAME
    case '(': marks_.push_back(stack_.size()); break;                  // MARK
    case '}': stack_.push_back(new_value(Kind::kDict)); break;         // EMPTY_DICT
    case ']': stack_.push_back(new_value(Kind::kList)); break;         // EMPTY_LIST
    case ')': push_tuple({}); break;                                   // EMPTY_TUPLE
    case 'N': stack_.push_back(new_value(Kind::kNone)); break;         // NONE
    case 0x88: case 0x89: {                                            // NEWTRUE, NEWFALSE
      auto v = new_value(Kind::kBool);
      v->integer = op == 0x88;
      stack_.push_back(v);
      break;
    }
    case 'X': push_string(read<uint32_t>()); break;                    // BINUNICODE
    case 0x8c: case 'U': case 'C': push_string(read<uint8_t>()); break;  // SHORT_BINUNICODE, SHORT_BINSTRING, SHORT_BINBYTES
    case 'T': case 'B': push_string(read<uint32_t>()); break;          // BINSTRING, BINBYTES
    case 'J': push_int(read<int32_t>()); break;                        // BININT
    case 'K': push_int(read<uint8_t>()); break;                        // BININT1
    case 'M': push_int(read<uint16_t>()); break;                       // BININT2
    case 0x8a: {                                                       // LONG1: little-endian two's complement
      const uint8_t n = read<uint8_t>();
      if (n > 8) fail("integer wider than 64 bits");
      const uint8_t* b = take(n);
      uint64_t x = 0;
      for (int i = 0; i < n; ++i) x |= uint64_t(b[i]) << (8 * i);
      if (n > 0 && n < 8 && (b[n - 1] & 0x80)) x |= ~uint64_t(0) << (8 * n);
      push_int(int64_t(x));
      break;
    }
    case 'G': {                                                        // BINFLOAT, big-endian
      const uint8_t* b = take(8);
      uint64_t bits = 0;
      for (int i = 0; i < 8; ++i) bits = (bits << 8) | b[i];
      auto v = new_value(Kind::kFloat);
      std::memcpy(&v->number, &bits, 8);
      stack_.push_back(v);
      break;
    }
    case 'q': memo_put(read<uint8_t>()); break;                        // BINPUT
    case 'r': memo_put(read<uint32_t>()); break;                       // LONG_BINPUT
    case 0x94: memo_put(memo_.size()); break;                          // MEMOIZE
    case 'h': case 'j': {                                              // BINGET, LONG_BINGET
      const uint64_t key = op == 'h' ? read<uint8_t>() : read<uint32_t>();
      const auto it = memo_.find(key);
      if (it == memo_.end()) fail("memo key " + std::to_string(key) + " unset");
      stack_.push_back(it->second);
      break;
    }
    case 't': push_tuple(pop_mark()); break;                           // TUPLE
    case 0x85: push_tuple({pop()}); break;                             // TUPLE1
    case 0x86: { auto b = pop(), a = pop(); push_tuple({a, b}); break; }             // TUPLE2
    case 0x87: { auto c = pop(), b = pop(), a = pop(); push_tuple({a, b, c}); break; }  // TUPLE3
    case 's': { auto v = pop(), k = pop(); set_items({k, v}); break; }              // SETITEM
    case 'u': set_items(pop_mark()); break;                            // SETITEMS
    case 'a': append_items({pop()}); break;                            // APPEND
    case 'e': append_items(pop_mark()); break;                         // APPENDS
    case 'c': {                                                        // GLOBAL "module\nname\n"
      const std::string module = read_line();
      const std::string name = read_line();
      auto v = new_value(Kind::kGlobal, module.size() + 1 + name.size());
      v->text = module + "." + name;
      stack_.push_back(v);
      break;
    }
    case 0x93: {                                                       // STACK_GLOBAL
      auto name = pop(), module = pop();
      if (name->kind != Kind::kString || module->kind != Kind::kString) fail("STACK_GLOBAL of non-strings");
      auto v = new_value(Kind::kGlobal, module->text.size() + 1 + name->text.size());
      v->text = module->text + "." + name->text;
      stack_.push_back(v);
      break;
    }
    case 'R': case 0x81: { auto args = pop(), callable = pop(); stack_.push_back(call(callable, args)); break; }
    case 'b': pop(); break;  // BUILD: the state of OrderedDict / tensor objects is not needed
    case 'Q': {                                                        // BINPERSID
      auto pid = pop();
      ValuePtr v = hooks_.persistent_load ? hooks_.persistent_load(*pid) : nullptr;
      if (v == nullptr) fail("unsupported persistent id");
      charge(kHookObjectBytes);
      stack_.push_back(v);
      break;
    }
    case '.': return false;                                            // STOP
    default: fail(str_cat("unsupported opcode 0x", std::hex, int(op)));
  }
  if (stack_.size() + marks_.size() > kMaxStack) fail("stack too deep");
  return true;
}

ValuePtr Machine::run() {
  while (step(*take(1))) {
  }
  return pop();
}

}  // namespace

ValuePtr run(const uint8_t* data, uint64_t size, const Hooks& hooks, const std::string& what,
             const LoadLimits& limits) {
  return Machine(data, size, hooks, what, limits).run();
}

}  // namespace aerie::pickle
