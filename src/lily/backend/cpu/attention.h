// Rotary position embedding and causal grouped-query attention over a KV cache.
#pragma once

#include <cstdint>
#include <vector>

#include "lily/backend/cpu/cpu_context.h"

namespace lily::cpu {

// inv_freq[i] = 1 / theta^(2i / rotary_dim), computed in float as transformers does.
std::vector<float> rope_inv_freq(double theta, int64_t rotary_dim);

// NeoX-style rotation of the first rotary_dim dims of each of `heads` vectors of
// `head_dim` at `pos` (pairs (j, j + rotary_dim/2)); the other dims pass through.
void apply_rope(float* x, int64_t heads, int64_t head_dim, int64_t rotary_dim, const float* inv_freq, int64_t pos);

// out[t, h] = softmax(q[t, h] . K[0..p0+t, h/group]^T * scale) V, for T queries at
// positions p0..p0+T-1. q, out: [T, heads, head_dim]; K, V: [positions, kv_heads, head_dim].
void causal_attention(const CpuContext& ctx, const float* q, int64_t T, int64_t p0, const float* K, const float* V, int64_t heads,
                      int64_t kv_heads, int64_t head_dim, float scale, float* out);

}  // namespace lily::cpu
