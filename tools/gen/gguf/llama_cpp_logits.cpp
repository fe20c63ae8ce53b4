// Prints llama.cpp's logits for one token sequence (all positions, one decode call, f32 KV cache) as a
// float32 .npy [n, n_vocab]: the figures tests/data/gguf's goldens hold. Built against the llama.cpp
// static libraries from ../shared/perf (see tools/gen/gguf/README.md).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "llama.h"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s MODEL.gguf ID,ID,... OUT.npy\n", argv[0]);
    return 2;
  }
  std::vector<llama_token> ids;
  for (const char* p = argv[2]; *p;) {
    char* end = nullptr;
    ids.push_back(llama_token(std::strtol(p, &end, 10)));
    p = *end == ',' ? end + 1 : end;
  }
  llama_backend_init();
  llama_model_params mp = llama_model_default_params();
  llama_model* model = llama_model_load_from_file(argv[1], mp);
  if (model == nullptr) return 1;
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = 256;
  cp.n_batch = 256;
  cp.n_ubatch = 256;
  cp.n_threads = cp.n_threads_batch = 1;
  cp.type_k = cp.type_v = GGML_TYPE_F32;
  cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
  llama_context* ctx = llama_init_from_model(model, cp);
  if (ctx == nullptr) return 1;
  llama_batch batch = llama_batch_init(int32_t(ids.size()), 0, 1);
  for (size_t i = 0; i < ids.size(); ++i) {
    batch.token[i] = ids[i];
    batch.pos[i] = llama_pos(i);
    batch.n_seq_id[i] = 1;
    batch.seq_id[i][0] = 0;
    batch.logits[i] = 1;
  }
  batch.n_tokens = int32_t(ids.size());
  if (llama_decode(ctx, batch) != 0) return 1;
  const int32_t n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
  FILE* out = std::fopen(argv[3], "wb");
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + std::to_string(ids.size()) + ", " +
                       std::to_string(n_vocab) + "), }";
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  const uint16_t len = uint16_t(header.size());
  std::fwrite("\x93NUMPY\x01\x00", 1, 8, out);
  std::fwrite(&len, 2, 1, out);
  std::fwrite(header.data(), 1, header.size(), out);
  for (size_t i = 0; i < ids.size(); ++i) std::fwrite(llama_get_logits_ith(ctx, int32_t(i)), 4, size_t(n_vocab), out);
  std::fclose(out);
  llama_batch_free(batch);
  llama_free(ctx);
  llama_model_free(model);
  return 0;
}
