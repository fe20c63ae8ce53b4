// Single-thread encode and decode throughput of the real tokenizers on ~4 MiB of mixed text built from
// the test corpus (tests/data/tokenizer/corpus.json) the same way the 1 MiB test case is.
//   tokenizer_bench [tokenizer_dir] [corpus.json]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include <nlohmann/json.hpp>

#include "tokenizer/tokenizer.h"

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

std::string mixed_text(const std::string& corpus_path, size_t min_bytes) {
  std::ifstream in(corpus_path);
  const auto json = nlohmann::json::parse(in);
  std::vector<std::string> cases;
  for (const auto& item : json.at("cases")) cases.push_back(item.at("text"));
  uint64_t x = std::stoull(json.at("mixed").at("seed").get<std::string>(), nullptr, 16);
  std::string text;
  while (text.size() < min_bytes) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    text += cases[x % cases.size()];
  }
  return text;
}

}  // namespace

int main(int argc, char** argv) {
  const char* env = std::getenv("AERIE_TOKENIZER_DIR");
  const std::string dir = argc > 1 ? argv[1] : env ? env : AERIE_SOURCE_DIR "/.cache/tokenizers";
  const std::string corpus = argc > 2 ? argv[2] : AERIE_SOURCE_DIR "/tests/data/tokenizer/corpus.json";
  const std::string text = mixed_text(corpus, 4u << 20);
  const double mb = static_cast<double>(text.size()) / 1e6;
  for (const char* model : {"llama3_1", "deepseek_v3"}) {
    auto start = std::chrono::steady_clock::now();
    const aerie::Tokenizer tok = aerie::Tokenizer::load(dir + "/" + model);
    const double load_s = seconds_since(start);
    (void)tok.encode(text.substr(0, 1 << 16));  // warm the thread's scratch
    constexpr int kRepeats = 3;
    double encode_s = 1e30, decode_s = 1e30;
    std::vector<int32_t> ids;
    for (int r = 0; r < kRepeats; ++r) {
      start = std::chrono::steady_clock::now();
      ids = tok.encode(text, false);
      encode_s = std::min(encode_s, seconds_since(start));
      start = std::chrono::steady_clock::now();
      const std::string back = tok.decode(ids);
      decode_s = std::min(decode_s, seconds_since(start));
      if (back != text) std::fprintf(stderr, "%s: round trip mismatch\n", model);
    }
    std::printf("%-12s load %.2f s | %.2f MB -> %zu ids | encode %.1f MB/s (%.2f M tokens/s) | decode %.1f MB/s\n",
                model, load_s, mb, ids.size(), mb / encode_s, static_cast<double>(ids.size()) / encode_s / 1e6,
                mb / decode_s);
  }
  return 0;
}
