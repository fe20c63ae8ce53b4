// The drafter registry: the ONLY place that decides what a --draft value is and whether it fits the
// target (models/registry.cpp is its twin for targets). A head folder's config.json says what it holds:
//
//   entry             picked by                                       fits targets    reads of the target
//   EAGLE-1 head      architectures LlamaForCausalLM,                 llama           final-normed hidden
//                     LlamaForCausalLMEagle                                           state; logits through
//                                                                                     its lm_head
//   EAGLE-3 MHA head  LlamaForCausalLMEagle3, or an EAGLE-1           llama,          2 or 3 layers'
//                     architecture whose tensors say EAGLE-3          deepseek_v3     residual streams
//                     (midlayer.*, a layer-0 hidden_norm, d2t)
//   EAGLE-3 MLA head  Eagle3DeepseekV2ForCausalLM,                    deepseek_v3     2 or 3 layers' residual
//                     Eagle3DeepseekV3ForCausalLM                                     streams; its cache is
//                                                                                     the target's latent width
//   MTP layer         --draft mtp (no folder: the target's own        deepseek_v3 with num_nextn_predict_layers
//                     model.layers.{num_hidden_layers}.*)             >= 1; final-normed hidden state
//   n-gram drafter    --draft ngram (no folder: prompt lookup,        llama,          nothing (the tokens
//                     spec/ngram_drafter.h)                           deepseek_v3     only); no layers to choose
//   suffix drafter    --draft suffix (no folder: a suffix index     llama,          nothing (the tokens
//                     over the sequence and earlier requests,       deepseek_v3     only); no layers to choose
//                     spec/suffix_drafter.h)
//   draft model       a full LlamaForCausalLM / DeepseekV3ForCausalLM llama,          nothing; same vocab_size,
//                     folder (model.layers.*, no fc / EAGLE-3         deepseek_v3     BOS/EOS and tokenizer.json
//                     tensors; spec/draft_model.h), tried first                       (spec/draft_model.h)
//
// A head must also agree with the target on the hidden size it reads (EAGLE-1: hidden_size; EAGLE-3:
// target_hidden_size, else hidden_size) and on vocab_size (it embeds and names tokens in the target's
// vocabulary). Heads that read only the final hidden state (EAGLE-1, MTP) refuse chosen target layers.
// Each refusal is an aerie::Error naming the mismatch, e.g.
//   ".../config.json: an EAGLE-3 MLA head (Eagle3DeepseekV3ForCausalLM) needs a DeepSeek-V3 target; the
//    target is llama (LlamaForCausalLM)"
//   ".../config.json: EAGLE-3 MHA head hidden_size 4096 does not match the target's hidden_size 2048 (...)"
// Which target layers an EAGLE-3 head fuses: spec/fused_layers.h (the rule follows the target's family).
// The configs are parsed in io/ (io/eagle_config.h, io/mla_head_config.h); the heads are spec/eagle_head.h,
// spec/mla_head.h and spec/mtp_drafter.h.
#pragma once

#include <memory>
#include <string>

#include "core/thread_pool.h"
#include "models/model.h"
#include "spec/draft_head.h"

namespace aerie {

enum class DrafterKind { kEagle1, kEagle3Mha, kEagle3Mla, kMtp, kNgram, kSuffix, kDraftModel };

// The --draft values that name the target's own MTP layer and the n-gram drafter.
inline constexpr const char* kMtpDraftName = "mtp";
inline constexpr const char* kNgramDraftName = "ngram";
inline constexpr const char* kSuffixDraftName = "suffix";

// "EAGLE-1 head", "EAGLE-3 MHA head", "EAGLE-3 MLA head", "MTP layer", "n-gram drafter".
const char* drafter_kind_name(DrafterKind kind);

// What `draft` (a head folder, "mtp" or "ngram") holds, by the table above. An aerie::Error for a folder
// without a readable config.json or 'architectures', a config its kind's parser refuses, or an
// architecture no entry is picked by (the error lists those that are).
DrafterKind identify_drafter(const std::string& draft);

// Loads `draft` (a head folder, or "mtp") as the draft head for `target`, which must outlive it:
// identifies it, checks that it fits the target (family, hidden size, vocabulary, and what its entry
// needs), chooses the target layers it fuses and binds its weights. Every refusal is an aerie::Error
// naming the mismatch; "ngram" is refused (it is no head: load_any_drafter loads it).
std::unique_ptr<DraftHead> load_drafter(const std::string& draft, const Model& target, ThreadPool& pool,
                                        const DraftLoadOptions& options = {});

// Any --draft value: a head as load_drafter loads it, the n-gram drafter with options.ngram (refused
// unless 1 <= min <= max <= NgramOptions::kMaxN, or with target layers chosen) or the suffix drafter with
// options.suffix (spec/suffix_drafter.h: validate). With options.suffix_beside_head, a head (not "ngram"
// or "suffix") with the suffix index beside it (spec/suffix_head.h).
std::unique_ptr<Drafter> load_any_drafter(const std::string& draft, const Model& target, ThreadPool& pool,
                                          const DraftLoadOptions& options = {});

}  // namespace aerie
