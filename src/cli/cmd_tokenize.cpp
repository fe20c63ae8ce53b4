// aerie tokenize: show how the model's tokenizer (and chat template) turns input into token ids.
#include <cstdio>

#include <nlohmann/json.hpp>

#include "cli/common.h"
#include "cli/options.h"
#include "cli/prompt.h"
#include "core/error.h"
#include "tokenizer/tokenizer_gguf.h"

namespace aerie::cli {
namespace {

// A token's bytes made printable: control bytes and invalid UTF-8 as \xNN, newline/tab as \n/\t.
std::string printable(std::string_view bytes) {
  std::string out;
  for (size_t i = 0; i < bytes.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(bytes[i]);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\\') {
      out += "\\\\";
    } else if (c < 0x20 || c == 0x7f || c >= 0x80) {
      // Keep whole valid UTF-8 characters; escape stray bytes.
      int len = c >= 0xf0 && c < 0xf8 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 0;
      bool whole = len > 0 && i + size_t(len) <= bytes.size();
      for (int k = 1; whole && k < len; ++k) whole = (static_cast<unsigned char>(bytes[i + size_t(k)]) & 0xc0) == 0x80;
      if (whole && c >= 0x80) {
        out.append(bytes.substr(i, size_t(len)));
        i += size_t(len) - 1;
      } else {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\x%02x", c);
        out += buf;
      }
    } else {
      out += char(c);
    }
  }
  return out;
}

}  // namespace

int run_tokenize(const std::vector<std::string>& argv) {
  const Args args = parse_options(Command::kTokenize, argv);
  if (args.has("--help")) {
    std::fputs(command_usage(Command::kTokenize).c_str(), stdout);
    return 0;
  }
  AERIE_CHECK(args.has("--model") || args.has("--tokenizer"), "give --model DIR (or --tokenizer DIR)");
  const int sources = int(args.has("--text")) + int(args.has("--file")) + int(args.has("--chat"));
  AERIE_CHECK(sources == 1, "give exactly one of --text, --file and --chat");
  const std::filesystem::path dir = args.has("--tokenizer") ? args.str("--tokenizer") : args.str("--model");
  const Tokenizer tokenizer = load_model_tokenizer(dir);

  std::string text;
  std::vector<int32_t> ids;
  if (args.has("--chat")) {
    AERIE_CHECK(!args.has("--no-special"), "--no-special applies to --text and --file");
    // Reuse the generate command's prompt builder: --chat FILE here is --messages FILE there.
    std::vector<std::string> prompt_argv = {"--messages", args.str("--chat")};
    for (const char* name : {"--chat-template", "--chat-kwargs"})
      if (args.has(name)) prompt_argv.insert(prompt_argv.end(), {name, args.str(name)});
    const Prompt prompt = build_prompt(parse_options(Command::kGenerate, prompt_argv), &tokenizer);
    text = prompt.text;
    ids.assign(prompt.ids.begin(), prompt.ids.end());
  } else {
    AERIE_CHECK(!args.has("--chat-template") && !args.has("--chat-kwargs"), "--chat-template and --chat-kwargs need --chat");
    std::vector<std::string> prompt_argv = {args.has("--text") ? "--prompt" : "--file",
                                            args.has("--text") ? args.str("--text") : args.str("--file")};
    const Prompt prompt = build_prompt(parse_options(Command::kGenerate, prompt_argv), &tokenizer);
    text = prompt.text;
    ids = tokenizer.encode(text, !args.has("--no-special"));
  }

  if (args.has("--json")) {
    nlohmann::json tokens = nlohmann::json::array();
    for (int32_t id : ids) tokens.push_back(printable(tokenizer.token_bytes(id)));
    const nlohmann::json out = {{"ids", ids}, {"tokens", tokens}, {"text", text}, {"n_tokens", ids.size()}};
    std::printf("%s\n", out.dump().c_str());
    return 0;
  }
  if (args.has("--ids-only")) {
    for (size_t i = 0; i < ids.size(); ++i) std::printf("%s%d", i ? "," : "", ids[i]);
    std::printf("\n");
    return 0;
  }
  if (args.has("--chat")) std::printf("rendered prompt:\n%s\n---\n", text.c_str());
  for (int32_t id : ids)
    std::printf("%8d  %s%s\n", id, printable(tokenizer.token_bytes(id)).c_str(), tokenizer.is_special(id) ? "  (special)" : "");
  std::printf("%zu tokens\n", ids.size());
  return 0;
}

}  // namespace aerie::cli
