// Writes a GGUF file in llama.cpp's qwen35moe layout from a Hugging Face
// checkpoint: the converter's names and conventions (norms with their 1
// baked in, A as -exp(A_log), the conv weight squeezed, experts stacked, the
// Gated DeltaNet's value heads in tiled order), the model's metadata, its
// tokenizer and chat template, and the matrices in the chosen ggml type. So
// tests and benchmarks need no external converter, and the file runs in
// llama.cpp as in Lily.
#pragma once

#include <string>

namespace lily::quant {

struct GgufExportOptions {
  // f32, f16, bf16, q8_0, q4_0, q6_k, or q4_k_m (llama.cpp's mix: Q4_K, with
  // Q6_K for the output and for attn_v and ffn_down in the layers where
  // llama.cpp gives them more bits).
  std::string type = "q8_0";
};

// Reads `src` (validated as a model first), writes the file `dst`; throws lily::Error.
void export_gguf(const std::string& src, const std::string& dst, const GgufExportOptions& opt);

}  // namespace lily::quant
