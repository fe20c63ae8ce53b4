#include "spec/spec_options.h"

#include "core/error.h"

namespace aerie {

void validate(const SpecOptions& spec) {
  AERIE_CHECK(spec.num_speculative_tokens >= 1 && spec.num_speculative_tokens <= 32,
              "num_speculative_tokens must be in [1, 32], got ", spec.num_speculative_tokens);
  AERIE_CHECK(spec.synthetic_acceptance <= 1.0, "synthetic acceptance must be in [0, 1], got ",
              spec.synthetic_acceptance);
}

}  // namespace aerie
