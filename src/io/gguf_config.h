// The config.json a GGUF model's metadata stands for: llama.cpp's `<arch>.*` keys mapped back to the Hugging
// Face names, so one parser (io/llama_config.h, io/deepseek_config.h) checks every value and range whatever
// the format. An architecture aerie does not run is refused naming it.
#pragma once

#include <nlohmann/json.hpp>

#include "io/gguf.h"

namespace aerie {

// The Hugging Face architecture a GGUF general.architecture runs as ("llama" -> "LlamaForCausalLM",
// "deepseek2" -> "DeepseekV3ForCausalLM"); throws naming the architecture for any other.
std::string gguf_hf_architecture(const GgufMetadata& metadata);

// config.json for the model: sizes, norms, RoPE (and, for deepseek2, MLA, MoE routing and YaRN) from the
// metadata; vocab_size from the token embedding's rows; tie_word_embeddings when there is no output.weight;
// bos/eos ids from tokenizer.ggml.* (eos gains the end-of-turn tokens llama.cpp stops at: <|eot_id|>,
// <|eom_id|>, <|end_of_text|>, <｜end▁of▁sentence｜> where the vocabulary has them).
nlohmann::json gguf_hf_config(const GgufMetadata& metadata, const WeightStore& store);

}  // namespace aerie
