// Sampling: logits -> probabilities (temperature, top-k, top-p, min-p) -> a token, with a seeded,
// per-request random generator so a run repeats exactly under the same seed.
//
// The filters apply in the order vLLM and Hugging Face use: temperature scales the logits, top-k keeps
// the k largest, then softmax, top-p keeps the smallest set of most likely tokens whose mass reaches p,
// min-p drops tokens whose probability is below min_p * (the largest probability); the rest is
// renormalised. Temperature 0 means greedy (argmax), and every other filter is then moot.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace aerie {

struct SamplingParams {
  float temperature = 0.0f;  // 0: greedy
  int64_t top_k = 0;         // 0 or negative: off
  float top_p = 1.0f;        // 1: off
  float min_p = 0.0f;        // 0: off
  uint64_t seed = 0;

  bool greedy() const { return temperature <= 0.0f; }
};

// OpenAI's logit_bias: `bias` is added to token `token`'s logit before temperature and every filter (and
// before the argmax of greedy decoding): +100 all but forces the token, -100 all but bans it.
struct LogitBias {
  int64_t token = 0;
  float bias = 0.0f;
  bool operator==(const LogitBias&) const = default;
};

// Copies `n_rows` rows of logits [n_rows, n_vocab] into `out` and adds the biases to every row (ids outside
// [0, n_vocab) are skipped). Returns out.data(): the rows a request samples from and verifies against.
// Throws aerie::Error naming logit_bias when a biased logit is not finite.
const float* add_logit_bias(std::span<const LogitBias> biases, const float* logits, int64_t n_rows, int64_t n_vocab,
                            std::vector<float>& out);

// Validates ranges; throws aerie::Error naming the field ("top_p must be in (0, 1], got 1.5").
void validate(const SamplingParams& params);

// xoshiro256** seeded through splitmix64: small, fast, and the same sequence on every platform (the
// standard library's distributions are not).
class Rng {
 public:
  explicit Rng(uint64_t seed = 0);
  uint64_t next_u64();
  // Uniform in [0, 1) with 24 bits of precision (enough for float probabilities; exact and portable).
  float next_unit_float();
  // Uniform in [0, 1) with 53 bits.
  double next_unit_double();

 private:
  uint64_t state_[4];
};

// Reusable buffers so sampling does not allocate per token once warmed up.
struct SamplerScratch {
  std::vector<int32_t> order;  // candidate ids, [n_vocab]
};

// Writes the filtered distribution the sampler draws from into probs [n_vocab] (zeros for removed tokens,
// sums to 1). For greedy params it is one-hot at the argmax. Rejection sampling in speculative decoding
// uses the same function for both the target's and the draft's distributions.
void compute_probs(const float* logits, int64_t n_vocab, const SamplingParams& params, float* probs,
                   SamplerScratch& scratch);

// Draws an index from a distribution that sums to (about) 1, by inverse CDF with one uniform draw.
int64_t sample_from_probs(const float* probs, int64_t n_vocab, Rng& rng);

// Greedy: argmax. Otherwise compute_probs + sample_from_probs. probs is [n_vocab] scratch.
int64_t sample_token(const float* logits, int64_t n_vocab, const SamplingParams& params, Rng& rng,
                     float* probs, SamplerScratch& scratch);

}  // namespace aerie
