// The tokenizer of a GGUF model, from its tokenizer.ggml.* metadata: llama.cpp's "gpt2" (byte-level BPE)
// model with the pre-tokenizer tokenizer.ggml.pre names. The keys are turned back into the tokenizer.json
// they were converted from (vocabulary, merges, added tokens by token type, the BOS template, the chat
// template) and loaded by the one Tokenizer implementation, so a GGUF file and its source folder tokenize
// alike. Token types (llama.cpp's): 1 normal -> the BPE vocabulary; 3 control -> an added special token;
// 4 user-defined -> an added non-special token; 5 unused -> a hole. Another model type, pre-tokenizer or
// token type is refused naming it.
#pragma once

#include "io/gguf.h"
#include "tokenizer/tokenizer.h"

namespace aerie {

// Pre-tokenizers aerie reproduces: "llama-bpe" (Llama 3, merges ignored for whole-word vocabulary hits as
// llama.cpp and tokenizers do) and "deepseek-v3".
Tokenizer tokenizer_from_gguf(const GgufMetadata& metadata, const LoadLimits& limits = LoadLimits());

// A model's tokenizer wherever it lives: a GGUF file's metadata, else Tokenizer::load (a folder holding
// tokenizer.json, or the file).
Tokenizer load_model_tokenizer(const std::filesystem::path& path, const LoadLimits& limits = LoadLimits());
// True when `path` holds a tokenizer: a GGUF file or a folder with tokenizer.json (or the file itself).
bool has_model_tokenizer(const std::filesystem::path& path);

}  // namespace aerie
