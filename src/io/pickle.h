// A pickle virtual machine for the subset torch.save uses for a state dict (protocol 2, with the few
// protocol 4 opcodes newer writers emit). It builds plain values; the meaning of torch's globals
// (_rebuild_tensor_v2, OrderedDict) is given by the caller through `reduce` and `persistent_load`.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/limits.h"

namespace aerie::pickle {

struct Value;
using ValuePtr = std::shared_ptr<Value>;

enum class Kind { kNone, kBool, kInt, kFloat, kString, kTuple, kList, kDict, kGlobal, kObject };

struct Value {
  Kind kind = Kind::kNone;
  int64_t integer = 0;                             // kBool, kInt
  double number = 0;                               // kFloat
  std::string text;                                // kString; kGlobal "module.name"; kObject type name
  std::vector<ValuePtr> items;                     // kTuple, kList; kDict as key, value, key, value...
  std::shared_ptr<void> object;                    // kObject: what reduce/persistent_load made
  // The machine's bookkeeping. depth: 1 for a scalar, 1 + the deepest item for a container. contained: the
  // value is an item of some container; a contained list or dict may no longer grow, which makes reference
  // cycles (and so leaks and unbounded depth) impossible to build.
  int depth = 1;
  bool contained = false;
};

ValuePtr make(Kind kind);

struct Hooks {
  // Called for REDUCE / NEWOBJ with the callable (a kGlobal) and its argument tuple.
  std::function<ValuePtr(const Value& callable, const Value& args)> reduce;
  // Called for BINPERSID with the persistent id.
  std::function<ValuePtr(const Value& pid)> persistent_load;
};

// Runs the program; returns the value on the stack at STOP. Throws aerie::Error("<what>: pickle ...") on
// truncated input, an unsupported opcode, a malformed stack, values nested deeper than
// LoadLimits::max_pickle_depth, more than LoadLimits::max_pickle_memory_bytes built (a few bytes of pickle
// can copy a memoised value many times over), or a container that would come to hold itself.
ValuePtr run(const uint8_t* data, uint64_t size, const Hooks& hooks, const std::string& what,
             const LoadLimits& limits = {});

}  // namespace aerie::pickle
