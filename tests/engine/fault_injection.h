// Fault injection for tests of the engine and the server: a target that fails every forward whose batch
// holds a chosen "poison" token (so a test decides which request's work fails).
#pragma once

#include <algorithm>
#include <string>

#include "core/error.h"
#include "models/model.h"

namespace aerie::testing {

// A Model that forwards everything to `inner`; fault-injecting targets override forward() and describe().
class DelegatingModel : public Model {
 public:
  explicit DelegatingModel(Model& inner) : inner_(inner) {}
  ForwardOutput forward(const StepBatch& batch) override { return inner_.forward(batch); }
  KvCache make_kv_cache(int64_t capacity, KvDType dtype) const override { return inner_.make_kv_cache(capacity, dtype); }
  int64_t n_vocab() const override { return inner_.n_vocab(); }
  int64_t n_embd() const override { return inner_.n_embd(); }
  int64_t n_layer() const override { return inner_.n_layer(); }
  int64_t max_position_embeddings() const override { return inner_.max_position_embeddings(); }
  uint64_t decode_weight_bytes() const override { return inner_.decode_weight_bytes(); }
  const std::vector<int64_t>& eos_token_ids() const override { return inner_.eos_token_ids(); }
  const std::vector<int64_t>& bos_token_ids() const override { return inner_.bos_token_ids(); }
  const Tensor& token_embedding() const override { return inner_.token_embedding(); }
  const LinearWeight& output_head() const override { return inner_.output_head(); }
  std::string describe() const override { return inner_.describe(); }
  ModelFamily family() const override { return inner_.family(); }
  const std::string& architecture() const override { return inner_.architecture(); }

 protected:
  Model& inner_;
};

// The target, failing every forward whose batch holds the poison token.
class PoisonTarget final : public DelegatingModel {
 public:
  PoisonTarget(Model& inner, int64_t poison) : DelegatingModel(inner), poison_(poison) {}
  ForwardOutput forward(const StepBatch& batch) override {
    if (std::find(batch.token_ids.begin(), batch.token_ids.end(), poison_) != batch.token_ids.end())
      throw Error("poisoned target batch");
    return inner_.forward(batch);
  }
  std::string describe() const override { return "poisoned " + inner_.describe(); }

 private:
  int64_t poison_;
};

}  // namespace aerie::testing
