// Mixture-of-experts routing and expert evaluation for this model's sparse
// block: softmax over all experts, top-k, renormalised weights, SwiGLU experts.
#pragma once

#include <cstdint>
#include <vector>

#include "lily/backend/cpu/matmul.h"
#include "lily/backend/backend.h"

namespace lily::cpu {

struct Route {
  std::vector<int32_t> expert;  // [T, k]
  std::vector<float> weight;    // [T, k], sums to 1 per token
};

// Picks the top `k` experts per token from router logits [T, E] (ties go to the lower index).
Route moe_route(const float* logits, int64_t T, int64_t E, int64_t k);

// y[T, H] = sum_k w_k expert_k(x) + sigmoid(x . shared_expert_gate) * shared(x).
// y = the MoE block of x [T, H]. `rows` says what the rows are (see matmul):
// a prompt runs each expert once over the tokens routed to it; decode tokens
// give each row exactly what a single-token step gives it.
// `log`, when given, records the routing or replaces it (RouteLog).
void moe_block(const CpuContext& ctx, const float* x, int64_t T, const ExpertWeights& w, int64_t k, float* y, Rows rows,
               RouteLog* log = nullptr);

}  // namespace lily::cpu
