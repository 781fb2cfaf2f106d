// The CUDA kernels of the forward pass, as host functions that launch them on
// a stream. Activations are fp32 with fp32 accumulation; weights are read in
// their stored type (F32, F16, BF16, or MLX affine 2..8-bit, dequantized in
// the load); the Gated DeltaNet state is fp32.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "lily/backend/cuda/device_matrix.h"

namespace lily::cuda {

// y [T, w.rows] = x [T, w.cols] W^T
void matmul(const DevMatrix& w, const float* x, int64_t T, float* y, cudaStream_t s);
// out [n, table.cols] = rows ids of the table
void embed(const DevMatrix& table, const int32_t* ids, int64_t n, float* out, cudaStream_t s);
void gather_rows(const float* x, int64_t cols, const int64_t* rows, int64_t n, float* out, cudaStream_t s);

void rmsnorm(const float* x, int64_t rows, int64_t dim, const float* w, float eps, float* y, cudaStream_t s);
void gated_rmsnorm(const float* x, const float* z, int64_t rows, int64_t dim, const float* w, float eps, float* y,
                   cudaStream_t s);
void add(float* x, const float* y, int64_t n, cudaStream_t s);
void sigmoid_mul(float* x, const float* gate, int64_t n, cudaStream_t s);
void split_query_gate(const float* qg, int64_t T, int64_t heads, int64_t hd, float* q, float* gate, cudaStream_t s);
// positions [T]: the absolute position of each row
void rope(float* x, int64_t T, int64_t heads, int64_t hd, int64_t rotary, const float* inv_freq, const int64_t* positions,
          cudaStream_t s);

// One sequence's rows: the causal conv + SiLU, its state [K-1, C] advanced.
void conv_silu(const float* x, int64_t T, int64_t C, const float* w, int64_t K, float* state, float* y, cudaStream_t s);
void delta_gates(float* mixed, int64_t T, int64_t C, int64_t key_heads, int64_t dk, float* beta, float* decay,
                 int64_t value_heads, const float* neg_exp_a, const float* dt_bias, cudaStream_t s);
// One sequence's rows through the gated delta rule (recurrent form), each
// value head's state [dk, dv] advanced. mixed is [T, C] = q | k | v.
void delta_rule(const float* mixed, int64_t C, const float* decay, const float* beta, int64_t T, int64_t key_heads,
                int64_t value_heads, int64_t dk, int64_t dv, float* state, float* out, cudaStream_t s);
// One sequence: causal GQA of q [T, heads, hd] at positions p0.. over K, V [p0 + T, kv_heads, hd].
void attention(const float* q, int64_t T, int64_t p0, const float* K, const float* V, int64_t heads, int64_t kv_heads,
               int64_t hd, float scale, float* out, cudaStream_t s);

// MoE. Each token has `per_token` slots: its top k experts, then the shared
// expert (index E of the expert tables).
// ids/weights [T, per_token]: softmax over E logits, top k (ties to the lower
// index), weights renormalised over the k; slot k is the shared expert.
void route_topk(const float* logits, int64_t T, int64_t E, int64_t k, int64_t per_token, int32_t* ids, float* weights,
                cudaStream_t s);
// weights[t, slot] = sigmoid(gate . x[t])
void shared_expert_weight(const DevMatrix& gate, const float* x, int64_t T, int64_t per_token, int64_t slot,
                          float* weights, cudaStream_t s);
// act [T * per_token, act_stride] = silu(gate_e x) * (up_e x) for each slot's expert e
void expert_gate_up(const DevMatrix* gates, const DevMatrix* ups, const int32_t* ids, int64_t T, int64_t per_token,
                    const float* x, int64_t H, int64_t max_inter, float* act, cudaStream_t s);
// y [T, H] = sum over slots of weight * down_e act
void expert_down(const DevMatrix* downs, const int32_t* ids, const float* weights, int64_t T, int64_t per_token,
                 const float* act, int64_t max_inter, int64_t H, float* y, cudaStream_t s);

// Throws lily::Error naming `what` when the last launch or call failed.
void check(cudaError_t e, const char* what);

}  // namespace lily::cuda
