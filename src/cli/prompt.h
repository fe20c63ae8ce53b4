// Prompt input shared by the commands that take one (generate, tokenize; declared in cli/options.cpp):
//   --ids 1,2,3                    token ids as given
//   --prompt TEXT / --file F       text, encoded with the model's tokenizer (BOS added as the tokenizer's
//                                  post-processor says)
//   --chat                         the text becomes a user message rendered with the model's chat template;
//                                  --system TEXT adds a system message; --messages FILE.json gives the
//                                  whole conversation instead (a list of messages, or an object with
//                                  "messages" and optionally "tools", as in an OpenAI request)
//   --chat-template FILE           a Jinja template file instead of tokenizer_config.json's chat_template
//   --chat-kwargs JSON             extra template variables, e.g. '{"thinking": true}' (DeepSeek-V3.1)
//   --tokenizer DIR                tokenizer.json / tokenizer_config.json from DIR instead of the model's
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/args.h"
#include "tokenizer/tokenizer.h"

namespace aerie::cli {

// The whole file; "<what> <path>: cannot open" when it cannot be read.
std::string read_text_file(const std::string& path, const char* what);

// The tokenizer of `model_dir` (or --tokenizer DIR). Null when the folder has no tokenizer.json and none
// is needed; an aerie::Error when one is needed (text or chat input) and missing or broken.
std::unique_ptr<Tokenizer> load_tokenizer_for(const Args& args, const std::filesystem::path& model_dir,
                                              bool required);

// Whether the arguments ask for text (needing a tokenizer) rather than ids.
bool prompt_needs_tokenizer(const Args& args);

struct Prompt {
  std::vector<int64_t> ids;
  std::string text;  // what was encoded: the rendered chat prompt or the plain text ("" for --ids)
  bool chat = false;
};

// Builds the prompt from the arguments; exactly one source must be given (--ids, --prompt, --file,
// --messages). `tokenizer` may be null only for --ids.
Prompt build_prompt(const Args& args, const Tokenizer* tokenizer);

// Renders a conversation with the tokenizer's chat template (or `template_source` when not empty), with
// add_generation_prompt = true, the tokenizer's BOS/EOS strings, `tools` (null when none) and `extra`
// variables. The result is encoded WITHOUT the tokenizer's own BOS (the template writes it), as Hugging
// Face's apply_chat_template does.
std::string render_chat(const Tokenizer& tokenizer, const nlohmann::ordered_json& messages,
                        const nlohmann::ordered_json& tools, const nlohmann::ordered_json& extra,
                        const std::string& template_source = "");

// The model's stop ids: config.json's eos_token_id merged with generation_config.json's.
std::vector<int64_t> stop_token_ids(const std::filesystem::path& model_dir, const std::vector<int64_t>& config_eos);

}  // namespace aerie::cli
