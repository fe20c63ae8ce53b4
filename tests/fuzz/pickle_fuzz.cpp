// The pickle machine alone, on raw pickle programs (data.pkl of a torch checkpoint, without the zip
// around it): opcodes, the stack, marks and the memo. The hooks build an object for any callable and any
// persistent id, so programs get past REDUCE and BINPERSID to the opcodes after them.
#include <cstddef>
#include <cstdint>

#include "core/error.h"
#include "io/pickle.h"

namespace {

using aerie::pickle::Kind;
using aerie::pickle::Value;
using aerie::pickle::ValuePtr;

const aerie::pickle::Hooks& hooks() {
  static const aerie::pickle::Hooks kHooks = [] {
    aerie::pickle::Hooks h;
    // collections.OrderedDict() is a dict (SETITEMS follows); anything else an opaque object.
    h.reduce = [](const Value& callable, const Value&) -> ValuePtr {
      if (callable.text == "collections.OrderedDict") return aerie::pickle::make(Kind::kDict);
      if (callable.text == "unsupported.callable") return nullptr;
      ValuePtr object = aerie::pickle::make(Kind::kObject);
      object->text = callable.text;
      return object;
    };
    h.persistent_load = [](const Value&) -> ValuePtr { return aerie::pickle::make(Kind::kObject); };
    return h;
  }();
  return kHooks;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const ValuePtr root = aerie::pickle::run(data, size, hooks(), "fuzz.pkl");
    return root ? 0 : -1;
  } catch (const aerie::Error&) {
    return -1;
  }
}
