// The canonical weight set of the model. Every checkpoint format is mapped
// onto this one form at load time, so the forward pass never sees a format's
// quirks: large matrices are views into the mapped files (zero-copy), small
// vectors are float copies with conventions normalised (norm weights are
// plain multipliers, the GDN decay is stored as -exp(A_log)). A backend that
// computes elsewhere holds a copy of this set whose views point into its own
// memory (Backend::bind).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "lily/backend/tensor.h"
#include "lily/model/config.h"

namespace lily {

struct GatedDeltaNetWeights {
  Matrix in_qkv;   // [2*key_dim + value_dim, hidden]: q | k | v, head-major
  Matrix in_z;     // [value_dim, hidden]
  Matrix in_b;     // [v_heads, hidden]
  Matrix in_a;     // [v_heads, hidden]
  Matrix out;      // [hidden, value_dim]
  Vector conv;                   // [conv_dim, kernel], tap j multiplies input t-(kernel-1)+j
  Vector neg_exp_a;              // [v_heads] = -exp(A_log)
  Vector dt_bias;                // [v_heads]
  Vector norm;                   // [value_head_dim], plain multiplier
};

struct AttentionWeights {
  Matrix q;  // [heads * 2 * head_dim, hidden], per head [q_h | gate_h]
  Matrix k;  // [kv_heads * head_dim, hidden]
  Matrix v;  // [kv_heads * head_dim, hidden]
  Matrix o;  // [hidden, heads * head_dim]
  Vector q_norm, k_norm;  // [head_dim], plain multipliers
};

struct MoeWeights {
  Matrix router;                              // [experts, hidden]
  std::vector<Matrix> gate, up, down;         // per expert: [inter, hidden], [inter, hidden], [hidden, inter]
  Matrix shared_gate, shared_up, shared_down; // the shared expert
  Matrix shared_expert_gate;                  // [1, hidden]
};

struct LayerWeights {
  LayerKind kind = LayerKind::LinearAttention;
  Vector input_norm, post_attention_norm;  // plain multipliers
  GatedDeltaNetWeights gdn;                           // when kind == LinearAttention
  AttentionWeights attn;                              // when kind == FullAttention
  MoeWeights moe;
};

// The multi-token-prediction head of the official release (`mtp.*`): from a
// token's embedding and the hidden state (after the final norm) of the
// position before it, one gated-attention decoder layer with its own MoE
// predicts the token after next, through the model's own LM head.
struct MtpWeights {
  Matrix fc;                 // [hidden, 2 * hidden]: input [norm(embedding) | norm(hidden)]
  Vector embed_norm, hidden_norm, final_norm;  // plain multipliers
  LayerWeights layer;        // kind == FullAttention
};

struct ModelWeights {
  Matrix embed;    // [vocab, hidden]
  Matrix lm_head;  // [vocab, hidden]
  Vector final_norm;
  std::vector<LayerWeights> layers;
  std::optional<MtpWeights> mtp;  // absent where the checkpoint dropped it (MLX conversions)
};

}  // namespace lily
