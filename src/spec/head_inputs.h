// The inputs the draft heads assemble before their decoder layer, written once so that each head's
// forward reads as its recipe (spec/eagle_head.h, spec/mla_head.h, spec/mtp_drafter.h give the formulas).
#pragma once

#include <cstdint>
#include <span>

#include "core/tensor.h"
#include "core/thread_pool.h"
#include "models/linear.h"
#include "models/scratch.h"
#include "spec/draft_head.h"

namespace aerie {

// x [n, fc.n_out()] = the EAGLE-3 feature g of every row:
//   kTarget: fc(concat_p fc_norm_p(f_p)), f_p = feature_parts[p] [n, target_n_embd] (fc_norm empty: the
//            parts as they are; one part without a norm goes to fc in place);
//   kSelf:   the fed-back feature, feature_parts[0] [n, fc.n_out()], copied.
// `fused` holds the concatenation [n, k * target_n_embd] when one is built.
void fuse_target_features(const DraftBatch& batch, int64_t target_n_embd, const LinearWeight& fc,
                          std::span<const Tensor* const> fc_norm, float eps, ScratchBuffer& fused, float* x,
                          ThreadPool& pool);

// out [n, 2 * n_embd] = [norm_a(a) | norm_b(b)] row by row, a and b [n, n_embd]; a null norm copies its
// half as it is. EAGLE-3's attention input (input_layernorm(embedding) | hidden_norm(g)), MTP's eh_proj
// input (enorm | hnorm), EAGLE-1's fc input (embedding | feature). `scratch` [n, n_embd] is left holding
// norm_b(b) when norm_b is given (the residual of EAGLE-3's norm_before_residual variant).
void concat_normed_pair(const float* a, const Tensor* norm_a, const float* b, const Tensor* norm_b, int64_t n,
                        int64_t n_embd, float eps, float* scratch, float* out, ThreadPool& pool);

}  // namespace aerie
