// The canonical weight set of the model. Every checkpoint format is mapped
// onto this one form at load time, so the forward pass never sees a format's
// quirks: large matrices are views into the mapped files (zero-copy), small
// vectors are float copies with conventions normalised (norm weights are
// plain multipliers, the GDN decay is stored as -exp(A_log)).
#pragma once

#include <cstdint>
#include <vector>

#include "lily/io/dtype.h"
#include "lily/model/config.h"

namespace lily {

// A row-major [rows, cols] matrix used as y = W x; `data` points into a
// mapped file. Either plain (F32, F16, BF16 elements) or affine-quantized as
// MLX stores it: packed `bits`-bit rows with a scale and a bias per group of
// `group_size` inputs ([rows, cols / group_size] of `scale_dtype`).
struct Matrix {
  DType dtype = DType::F32;  // element type of a plain matrix
  const void* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
  int bits = 0;              // > 0: quantized
  int group_size = 0;
  const void* scales = nullptr;
  const void* biases = nullptr;
  DType scale_dtype = DType::BF16;

  bool quantized() const { return bits > 0; }
  size_t row_bytes() const;
  size_t bytes() const;  // weights plus scales and biases
  const void* row(int64_t r) const { return static_cast<const uint8_t*>(data) + static_cast<size_t>(r) * row_bytes(); }
  // Row `r` as floats (converted or dequantized).
  void row_to_float(int64_t r, float* out) const;
};

struct GatedDeltaNetWeights {
  Matrix in_qkv;   // [2*key_dim + value_dim, hidden]: q | k | v, head-major
  Matrix in_z;     // [value_dim, hidden]
  Matrix in_b;     // [v_heads, hidden]
  Matrix in_a;     // [v_heads, hidden]
  Matrix out;      // [hidden, value_dim]
  std::vector<float> conv;       // [conv_dim, kernel], tap j multiplies input t-(kernel-1)+j
  std::vector<float> neg_exp_a;  // [v_heads] = -exp(A_log)
  std::vector<float> dt_bias;    // [v_heads]
  std::vector<float> norm;       // [value_head_dim], plain multiplier
};

struct AttentionWeights {
  Matrix q;  // [heads * 2 * head_dim, hidden], per head [q_h | gate_h]
  Matrix k;  // [kv_heads * head_dim, hidden]
  Matrix v;  // [kv_heads * head_dim, hidden]
  Matrix o;  // [hidden, heads * head_dim]
  std::vector<float> q_norm, k_norm;  // [head_dim], plain multipliers
};

struct MoeWeights {
  Matrix router;                              // [experts, hidden]
  std::vector<Matrix> gate, up, down;         // per expert: [inter, hidden], [inter, hidden], [hidden, inter]
  Matrix shared_gate, shared_up, shared_down; // the shared expert
  Matrix shared_expert_gate;                  // [1, hidden]
};

struct LayerWeights {
  LayerKind kind = LayerKind::LinearAttention;
  std::vector<float> input_norm, post_attention_norm;  // plain multipliers
  GatedDeltaNetWeights gdn;                           // when kind == LinearAttention
  AttentionWeights attn;                              // when kind == FullAttention
  MoeWeights moe;
};

struct ModelWeights {
  Matrix embed;    // [vocab, hidden]
  Matrix lm_head;  // [vocab, hidden]
  std::vector<float> final_norm;
  std::vector<LayerWeights> layers;
};

}  // namespace lily
