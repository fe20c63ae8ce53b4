// Where an EAGLE-3 head's tensors sit: publishers spell the same head several ways (EAGLE repo and
// SpecForge "midlayer.*", NVIDIA / MAX "layers.0.*", vLLM and SGLang with everything under "model.").
// Shared by the MHA and MLA heads and by the drafter registry, which reads the names to tell EAGLE-1 from
// EAGLE-3 when the architecture does not.
#pragma once

#include <string>

#include "io/weight_store.h"

namespace aerie {

// Some tensor's name starts with `prefix`.
bool has_prefix(const WeightStore& store, const std::string& prefix);

// `name`, or "model." + name when only that is present (fc, norm, embed_tokens, fc_norm.{i}).
std::string top_name(const WeightStore& store, const std::string& name);

// The decoder layer's prefix: the first of midlayer., model.midlayer., layers.0., model.layers.0. present
// (layers.0. when none is).
std::string eagle3_layer_prefix(const WeightStore& store);

// The tensors say EAGLE-3: a midlayer.*, a layer-0 hidden_norm or a d2t (each possibly under model.).
bool has_eagle3_tensors(const WeightStore& store);

}  // namespace aerie
