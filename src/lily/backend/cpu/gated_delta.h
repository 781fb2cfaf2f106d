// Gated DeltaNet kernels: the causal depthwise convolution with its rolling
// state, and the gated delta rule over one head, both as the token-by-token
// recurrence (decode) and the chunked form used for prefill. The two forms
// compute the same function; tests hold them to each other.
#pragma once

#include <cstdint>

#include "lily/backend/cpu/cpu_context.h"

namespace lily::cpu {

// Causal depthwise conv + SiLU over T rows of `channels`. `state` holds the
// previous kernel-1 pre-conv rows, oldest first, and is advanced in place.
// w is [channels, kernel]; x and y are [T, channels] (y must not alias x).
void causal_conv_silu(const CpuContext& ctx, const float* x, int64_t T, int64_t channels, const float* w,
                      int64_t kernel, float* state, float* y);

// Strided view of one head's per-token inputs: element t of a vector is at ptr + t * stride.
struct DeltaHeadInputs {
  const float* q;  // [dk], l2-normed and scaled
  const float* k;  // [dk], l2-normed
  const float* v;  // [dv]
  const float* g;  // log decay (<= 0)
  const float* beta;
  int64_t q_stride, k_stride, v_stride, g_stride, beta_stride;
};

// S = S*exp(g_t); d = (v_t - S^T k_t)*beta_t; S += k_t d^T; o_t = S^T q_t. state is [dk, dv].
void gated_delta_recurrent(Isa isa, const DeltaHeadInputs& in, int64_t T, int64_t dk, int64_t dv, float* state, float* out,
                           int64_t out_stride);

// The same rule computed chunk by chunk (WY form with a unitriangular solve
// per chunk). The first chunk holds `first_chunk` steps (1..chunk): callers
// align chunks to absolute positions, so a prompt resumed from a state saved
// at a multiple of `chunk` is computed with exactly the same arithmetic.
void gated_delta_chunked(Isa isa, const DeltaHeadInputs& in, int64_t T, int64_t dk, int64_t dv, int64_t chunk,
                         int64_t first_chunk, float* state, float* out, int64_t out_stride);

}  // namespace lily::cpu
