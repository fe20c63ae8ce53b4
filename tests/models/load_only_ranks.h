// A Communicator that stands for rank `rank` of `size` while a model loads: sharding at load exchanges
// nothing, so any collective is a test failure (an aerie::Error naming it).
#pragma once

#include <span>
#include <string>

#include "core/error.h"
#include "dist/communicator.h"

namespace aerie::testing {

class LoadOnlyRanks final : public dist::Communicator {
 public:
  LoadOnlyRanks(int rank, int size) : rank_(rank), size_(size) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string name() const override { return "load-only"; }
  void all_reduce_sum(std::span<float>) override { unexpected(); }
  void broadcast(std::span<std::byte>, int) override { unexpected(); }
  void all_to_all_v(std::span<const float>, std::span<const int>, std::span<float>, std::span<const int>) override {
    unexpected();
  }
  void barrier() override { unexpected(); }
  [[noreturn]] void abort(int) override { unexpected(); }

 private:
  [[noreturn]] static void unexpected() { throw Error("LoadOnlyRanks: a collective while loading"); }
  int rank_, size_;
};

}  // namespace aerie::testing
