#include "models/moe.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "io/trace.h"
#include "ops/ops.h"
#include "ops/ref/ref_ops.h"

namespace aerie {

void route_token(const float* scores, const float* bias, const RouterShape& s, int32_t* experts, float* weights) {
  const int64_t n_per_group = s.n_expert / s.n_group;
  // Selection scores: sigmoid + correction bias; -inf marks experts of groups not kept.
  thread_local std::vector<float> biased, group_score;  // no allocation per token once grown
  thread_local std::vector<int64_t> groups, order;
  biased.resize(size_t(s.n_expert));
  for (int64_t e = 0; e < s.n_expert; ++e) biased[size_t(e)] = scores[e] + (bias != nullptr ? bias[e] : 0.0f);
  // "a before b": larger score first, then lower index.
  auto before = [](const std::vector<float>& v) {
    return [&v](int64_t a, int64_t b) { return v[size_t(a)] > v[size_t(b)] || (v[size_t(a)] == v[size_t(b)] && a < b); };
  };
  if (s.n_group > 1) {
    group_score.resize(size_t(s.n_group));
    for (int64_t g = 0; g < s.n_group; ++g) {
      float top1 = -INFINITY, top2 = -INFINITY;
      for (int64_t e = g * n_per_group; e < (g + 1) * n_per_group; ++e) {
        const float v = biased[size_t(e)];
        if (v > top1) {
          top2 = top1;
          top1 = v;
        } else if (v > top2) {
          top2 = v;
        }
      }
      group_score[size_t(g)] = top1 + top2;
    }
    groups.resize(size_t(s.n_group));
    std::iota(groups.begin(), groups.end(), 0);
    std::partial_sort(groups.begin(), groups.begin() + s.topk_group, groups.end(), before(group_score));
    // groups[topk_group..] were dropped: their experts can no longer be chosen.
    for (int64_t i = s.topk_group; i < s.n_group; ++i)
      for (int64_t e = groups[size_t(i)] * n_per_group; e < (groups[size_t(i)] + 1) * n_per_group; ++e)
        biased[size_t(e)] = -INFINITY;
  }
  order.resize(size_t(s.n_expert));
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + s.n_expert_used, order.end(), before(biased));
  float sum = 0.0f;
  for (int64_t i = 0; i < s.n_expert_used; ++i) {
    experts[i] = int32_t(order[size_t(i)]);
    weights[i] = scores[order[size_t(i)]];
    sum += weights[i];
  }
  const float norm = s.norm_topk_prob ? 1.0f / (sum + 1e-20f) : 1.0f;
  for (int64_t i = 0; i < s.n_expert_used; ++i) weights[i] = weights[i] * norm * s.routed_scaling_factor;
}

namespace {

// Traces each token's chosen experts and weights ([n_tokens, k] each), ascending by expert id as the
// reference lists them (routing keeps them in the order chosen).
void trace_routes(const int32_t* chosen, const float* chosen_weight, int64_t n_tokens, int64_t k) {
  std::vector<int32_t> experts(chosen, chosen + n_tokens * k);
  std::vector<float> weights(chosen_weight, chosen_weight + n_tokens * k);
  std::vector<int64_t> order(static_cast<size_t>(k));
  for (int64_t t = 0; t < n_tokens; ++t) {
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return chosen[t * k + a] < chosen[t * k + b]; });
    for (int64_t i = 0; i < k; ++i) {
      experts[size_t(t * k + i)] = chosen[t * k + order[size_t(i)]];
      weights[size_t(t * k + i)] = chosen_weight[t * k + order[size_t(i)]];
    }
  }
  trace::write_ints("experts", experts.data(), n_tokens, k);
  trace::write("expert_weights", weights.data(), n_tokens, k);
}

}  // namespace

void moe_route(const float* x, int64_t n_tokens, const MoeWeights& w, const RouterShape& s, MoeScratch& scratch,
               ThreadPool& pool) {
  const int64_t k = s.n_expert_used;
  // Router: logits [n_tokens, n_expert] -> sigmoid scores -> chosen experts and weights per token.
  float* logits = scratch.logits.reserve(std::max<int64_t>(n_tokens, 1) * s.n_expert);
  if (n_tokens > 0) linear(x, n_tokens, w.router, logits, pool);
  AERIE_TRACE("router_logits", logits, n_tokens, s.n_expert);  // before the sigmoid overwrites them
  scratch.bias.resize(size_t(s.n_expert));
  for (int64_t e = 0; e < s.n_expert; ++e)
    scratch.bias[size_t(e)] = w.router_bias != nullptr ? ops::ref::load_float(*w.router_bias, e) : 0.0f;
  scratch.chosen.resize(size_t(n_tokens * k));
  scratch.chosen_weight.resize(size_t(n_tokens * k));
  for (int64_t t = 0; t < n_tokens; ++t) {
    float* scores = logits + t * s.n_expert;
    for (int64_t e = 0; e < s.n_expert; ++e) scores[e] = 1.0f / (1.0f + std::exp(-scores[e]));
    route_token(scores, scratch.bias.data(), s, scratch.chosen.data() + t * k, scratch.chosen_weight.data() + t * k);
  }
  if (trace::enabled()) trace_routes(scratch.chosen.data(), scratch.chosen_weight.data(), n_tokens, k);
}

void count_routed_rows(const int32_t* chosen, int64_t n_pairs, int64_t n_expert, std::vector<int64_t>& rows) {
  rows.resize(size_t(n_expert), 0);
  for (int64_t p = 0; p < n_pairs; ++p) ++rows[size_t(chosen[p])];
}

void moe_run_experts(const float* x, int64_t x_stride, int64_t n_rows, const int32_t* chosen, const float* weight,
                     int64_t k, const MoeWeights& w, MoeScratch& scratch, float* out, ThreadPool& pool) {
  const int64_t n_embd = w.router.n_in(), n_expert = int64_t(w.experts.size());
  // Group the (row, slot) pairs of this rank's experts by expert, rows ascending within one (a counting sort):
  //   chosen = [r0: 5 2 | r1: 2 7]  ->  expert 2: (r0,1) (r1,0);  expert 5: (r0,0);  expert 7: (r1,1)
  auto mine = [&](int32_t e) { return e >= w.owned.begin && e < w.owned.end; };
  scratch.expert_begin.assign(size_t(n_expert + 1), 0);
  for (int64_t p = 0; p < n_rows * k; ++p)
    if (mine(chosen[p])) ++scratch.expert_begin[size_t(chosen[p]) + 1];
  for (int64_t e = 0; e < n_expert; ++e) scratch.expert_begin[size_t(e + 1)] += scratch.expert_begin[size_t(e)];
  scratch.by_expert.resize(size_t(scratch.expert_begin.back()));
  std::vector<int64_t>& fill = scratch.expert_fill;
  fill.assign(scratch.expert_begin.begin(), scratch.expert_begin.end() - 1);
  for (int64_t p = 0; p < n_rows * k; ++p)
    if (mine(chosen[p])) scratch.by_expert[size_t(fill[size_t(chosen[p])]++)] = p;

  // Each chosen expert once over its rows; out[r] += weight * expert(x[r]), experts in ascending index.
  if (n_rows > 0) std::memset(out, 0, size_t(n_rows * n_embd) * sizeof(float));
  for (int64_t e = w.owned.begin; e < w.owned.end; ++e) {
    const int64_t begin = scratch.expert_begin[size_t(e)], count = scratch.expert_begin[size_t(e + 1)] - begin;
    if (count == 0) continue;
    float* xe = scratch.x_expert.reserve(count * n_embd);  // [count, n_embd]
    float* ye = scratch.y_expert.reserve(count * n_embd);  // [count, n_embd]
    for (int64_t j = 0; j < count; ++j)
      std::memcpy(xe + j * n_embd, x + (scratch.by_expert[size_t(begin + j)] / k) * x_stride,
                  size_t(n_embd) * sizeof(float));
    swiglu_ffn(xe, count, w.experts[size_t(e)], scratch.ffn, ye, pool);
    for (int64_t j = 0; j < count; ++j) {
      const int64_t p = scratch.by_expert[size_t(begin + j)];
      const float wt = weight[p];
      float* dst = out + (p / k) * n_embd;
      const float* src = ye + j * n_embd;
      for (int64_t i = 0; i < n_embd; ++i) dst[i] += wt * src[i];
    }
  }
}

namespace {

void add_shared_experts(const float* x, int64_t n_tokens, const MoeWeights& w, MoeScratch& scratch, float* out,
                        ThreadPool& pool) {
  const int64_t n_embd = w.router.n_in();
  if (n_tokens == 0) return;
  float* shared = scratch.shared_out.reserve(n_tokens * n_embd);
  swiglu_ffn(x, n_tokens, w.shared, scratch.ffn, shared, pool);
  AERIE_TRACE("shared_out", shared, n_tokens, n_embd);
  ops::add_inplace(out, shared, n_tokens * n_embd);
}

}  // namespace

void moe_ffn(const float* x, int64_t n_tokens, const MoeWeights& w, const RouterShape& s, MoeScratch& scratch,
             float* out, ThreadPool& pool) {
  const int64_t n_embd = w.router.n_in(), k = s.n_expert_used;
  moe_route(x, n_tokens, w, s, scratch, pool);
  count_routed_rows(scratch.chosen.data(), n_tokens * k, s.n_expert, scratch.routed_rows);
  moe_run_experts(x, n_embd, n_tokens, scratch.chosen.data(), scratch.chosen_weight.data(), k, w, scratch, out, pool);
  AERIE_TRACE("routed_out", out, n_tokens, n_embd);
  if (w.has_shared && w.shared_here) add_shared_experts(x, n_tokens, w, scratch, out, pool);
}

}  // namespace aerie
