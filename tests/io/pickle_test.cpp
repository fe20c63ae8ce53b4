// The pickle machine on hostile programs: whatever the bytes, it ends in an aerie::Error naming the limit,
// never a crash (deep recursion when values are freed), a leak (reference cycles) or memory many times the
// program's size.
#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "io/pickle.h"
#include "pickle_writer.h"

namespace aerie {
namespace {

using testing::PickleWriter;

std::string run_error(const std::string& program, const LoadLimits& limits = {}) {
  try {
    pickle::run(reinterpret_cast<const uint8_t*>(program.data()), program.size(), {}, "data.pkl", limits);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Pickle, PlainValuesStillWork) {
  PickleWriter w;
  w.op(']').put(0).op('(').integer(7).str("x").op(')').op('e');  // [7, "x", ()]
  w.op('}').put(1).str("k").get(0).op('s');                       // {"k": that list}
  w.op(char(0x86)).op('.');                                       // ([...], {...})
  const pickle::ValuePtr v =
      pickle::run(reinterpret_cast<const uint8_t*>(w.bytes.data()), w.bytes.size(), {}, "data.pkl");
  ASSERT_EQ(v->kind, pickle::Kind::kTuple);
  ASSERT_EQ(v->items.size(), 2u);
  EXPECT_EQ(v->items[0]->items.size(), 3u);
  EXPECT_EQ(v->items[1]->items[1], v->items[0]);  // shared through the memo, not copied
  EXPECT_EQ(v->depth, 4);  // tuple > dict > list > int
}

// A chain of lists each holding the previous one, built through the memo with a stack of one: 7 bytes a
// level. Freed recursively, a million levels overflow the C++ stack.
TEST(Pickle, DeepNestingIsRefused) {
  PickleWriter w;
  w.op(']').put(0);
  for (int i = 0; i < 1'000'000; ++i) w.op(']').get(0).op('a').put(0).op('b');
  const std::string error = run_error(w.op('.').bytes);
  EXPECT_NE(error.find("data.pkl: pickle: values nest deeper than 128 levels (LoadLimits::max_pickle_depth)"),
            std::string::npos)
      << error;
}

TEST(Pickle, CyclesAreRefused) {
  PickleWriter self;  // l = []; l.append(l)
  self.op(']').put(0).get(0).op('a').op('.');
  EXPECT_NE(run_error(self.bytes).find("a container would hold itself"), std::string::npos);
  PickleWriter pair;  // a = []; b = []; b.append(a); a.append(b)
  pair.op(']').put(0).op(']').put(1).get(0).op('a').op('b').get(1).op('a').op('.');
  EXPECT_NE(run_error(pair.bytes).find("APPENDS on a list that is already inside another value"), std::string::npos);
  PickleWriter dict;  // d = {}; t = (d,); d["k"] = t
  dict.op('}').put(0).get(0).op(char(0x85)).put(1).op('b').str("k").get(1).op('s').op('.');
  const std::string error = run_error(dict.bytes);
  EXPECT_NE(error.find("already inside another value"), std::string::npos) << error;
}

// A 64 KiB string in the memo and STACK_GLOBAL on it: 6 bytes of program build 128 KiB that stay alive in a
// list; these 94 KB of program would hold 640 MiB (with a 4 MiB limit here, to keep the test small).
TEST(Pickle, AmplificationIsBounded) {
  PickleWriter w;
  w.op(']').str(std::string(64 << 10, 'm')).put(0).op('b');
  for (int i = 0; i < 5000; ++i) w.get(0).get(0).op(char(0x93)).op('a');
  LoadLimits limits;
  limits.max_pickle_memory_bytes = 4 << 20;
  const std::string error = run_error(w.op('.').bytes, limits);
  EXPECT_NE(error.find("data.pkl builds more than 4194304 bytes of values (LoadLimits::max_pickle_memory_bytes)"),
            std::string::npos)
      << error;
}

// What a state dict of 1000 tensors builds stays far below the default limit.
TEST(Pickle, StateDictsStayWithinTheDefaultLimit) {
  PickleWriter w;
  w.begin_state_dict();
  for (int i = 0; i < 1000; ++i) {
    const std::string n = std::to_string(i);
    w.str(std::string("model.layers.").append(n).append(".mlp.down_proj.weight"));
    w.global("torch._utils", "_rebuild_tensor_v2");
    w.op('(').op('(').str("storage").global("torch", "BFloat16Storage").str(n).str("cpu");
    w.integer(1 << 20).op('t').op('Q').integer(0).int_tuple({1024, 1024}).int_tuple({1024, 1}).op(char(0x89));
    w.global("collections", "OrderedDict").op(')').op('R').op('t').op('R');
  }
  w.end_state_dict();
  pickle::Hooks hooks;
  hooks.reduce = [](const pickle::Value& callable, const pickle::Value&) {
    return pickle::make(callable.text == "collections.OrderedDict" ? pickle::Kind::kDict : pickle::Kind::kObject);
  };
  hooks.persistent_load = [](const pickle::Value&) { return pickle::make(pickle::Kind::kObject); };
  LoadLimits limits;
  limits.max_pickle_memory_bytes = 4 << 20;  // 1/64 of the default
  const pickle::ValuePtr v =
      pickle::run(reinterpret_cast<const uint8_t*>(w.bytes.data()), w.bytes.size(), hooks, "data.pkl", limits);
  EXPECT_EQ(v->items.size(), 2000u);
}

TEST(Pickle, MarksCountAgainstTheStack) {
  const std::string error = run_error(std::string(2u << 20, '('));
  EXPECT_NE(error.find("stack too deep"), std::string::npos) << error;
}

}  // namespace
}  // namespace aerie
