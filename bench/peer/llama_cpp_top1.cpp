// llama.cpp's top-1 token at every position of a token sequence, for
// comparing a GGUF file's answers in llama.cpp with Lily's on the same file
// (bench/peer/llama_cpp_top1.sh builds it against llama.cpp's library).
//   llama_cpp_top1 MODEL.gguf 1,2,3,...   prints one "position token logit gap" line per position
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "llama.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s MODEL.gguf TOKENS (comma-separated ids)\n", argv[0]);
    return 2;
  }
  std::vector<llama_token> tokens;
  for (const char* p = argv[2]; *p;) {
    char* end = nullptr;
    const long id = std::strtol(p, &end, 10);
    if (end == p || (*end && *end != ',')) {
      std::fprintf(stderr, "'%s' is not a comma-separated list of token ids\n", argv[2]);
      return 2;
    }
    tokens.push_back(static_cast<llama_token>(id));
    p = *end ? end + 1 : end;
  }
  llama_backend_init();
  llama_model_params mp = llama_model_default_params();
  mp.n_gpu_layers = 0;
  llama_model* model = llama_model_load_from_file(argv[1], mp);
  if (!model) return 1;
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = cp.n_batch = cp.n_ubatch = static_cast<uint32_t>(tokens.size() < 64 ? 64 : tokens.size());
  cp.n_threads = cp.n_threads_batch = 2;
  llama_context* ctx = llama_init_from_model(model, cp);
  if (!ctx) return 1;
  llama_batch batch = llama_batch_init(static_cast<int32_t>(tokens.size()), 0, 1);
  for (size_t i = 0; i < tokens.size(); ++i) {
    batch.token[i] = tokens[i];
    batch.pos[i] = static_cast<llama_pos>(i);
    batch.n_seq_id[i] = 1;
    batch.seq_id[i][0] = 0;
    batch.logits[i] = 1;
  }
  batch.n_tokens = static_cast<int32_t>(tokens.size());
  if (llama_decode(ctx, batch) != 0) return 1;
  const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
  for (size_t i = 0; i < tokens.size(); ++i) {
    const float* l = llama_get_logits_ith(ctx, static_cast<int32_t>(i));
    int best = 0, second = -1;
    for (int v = 1; v < n_vocab; ++v) {
      if (l[v] > l[best]) second = best, best = v;
      else if (second < 0 || l[v] > l[second]) second = v;
    }
    std::printf("%zu %d %.6f %.6f\n", i, best, l[best], l[best] - l[second]);
  }
  llama_batch_free(batch);
  llama_free(ctx);
  llama_model_free(model);
  return 0;
}
