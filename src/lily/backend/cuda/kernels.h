// The CUDA kernels of the forward pass, as host functions that launch them on
// a stream. Activations (A) are float or bf16, always accumulated in fp32;
// weights are read in their stored type (F32, F16, BF16, or MLX affine
// 2..8-bit, dequantized in the load); the Gated DeltaNet state is fp32. Each
// template is instantiated for both activation types in its .cu file.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "lily/backend/cuda/device_matrix.h"

namespace lily::cuda {

using bf16 = __nv_bfloat16;

// y [T, w.rows] = x [T, w.cols] W^T (Y may differ from X: the router's logits are float)
template <class X, class Y>
void matmul(const DevMatrix& w, const X* x, int64_t T, Y* y, cudaStream_t s);
// Several products of the same x [T, cols]: job i writes y_i [T, w_i.rows],
// fp32 where y_float, else in X. One launch where the matrices allow it.
constexpr int kMaxProducts = 4;
struct ProductJob {
  DevMatrix w;
  void* y;
  bool y_float;
};
template <class X>
void matmul_batch(const ProductJob* jobs, int n, const X* x, int64_t T, cudaStream_t s);
// out [n, table.cols] = rows ids of the table
template <class A>
void embed(const DevMatrix& table, const int32_t* ids, int64_t n, A* out, cudaStream_t s);
template <class A>
void gather_rows(const A* x, int64_t cols, const int64_t* rows, int64_t n, A* out, cudaStream_t s);
// host <-> device conversions of activations
void to_bf16(const float* x, int64_t n, bf16* y, cudaStream_t s);
void to_float(const bf16* x, int64_t n, float* y, cudaStream_t s);

template <class A>
void rmsnorm(const A* x, int64_t rows, int64_t dim, const float* w, float eps, A* y, cudaStream_t s);
// x += y, then h = rmsnorm(x): equal to add then rmsnorm
template <class A>
void add_rmsnorm(A* x, const A* y, int64_t rows, int64_t dim, const float* w, float eps, A* h, cudaStream_t s);
template <class A>
void gated_rmsnorm(const A* x, const A* z, int64_t rows, int64_t dim, const float* w, float eps, A* y, cudaStream_t s);
template <class A>
void add(A* x, const A* y, int64_t n, cudaStream_t s);
template <class A>
void sigmoid_mul(A* x, const A* gate, int64_t n, cudaStream_t s);
template <class A>
void split_query_gate(const A* qg, int64_t T, int64_t heads, int64_t hd, A* q, A* gate, cudaStream_t s);
// positions [T]: the absolute position of each row
template <class A>
void rope(A* x, int64_t T, int64_t heads, int64_t hd, int64_t rotary, const float* inv_freq, const int64_t* positions,
          cudaStream_t s);

// split_query_gate, rmsnorm of q's heads (q_norm) and k's (k_norm, k in
// place), then rope of both, in one launch with the same results.
template <class A>
void attention_inputs(const A* qg, A* k, int64_t T, int64_t heads, int64_t kv_heads, int64_t hd, const float* q_norm,
                      const float* k_norm, float eps, int64_t rotary, const float* inv_freq, const int64_t* positions,
                      A* q, A* gate, cudaStream_t s);
// One sequence's single row x [C]: conv_silu into y, then delta_gates on it
// (beta and decay that row's [value_heads]), in one launch with the same results.
template <class A>
void conv_gates(const A* x, int64_t C, const float* w, int64_t K, float* state, A* y, int64_t key_heads, int64_t dk,
                float* beta, float* decay, int64_t value_heads, const float* neg_exp_a, const float* dt_bias,
                cudaStream_t s);
// One sequence's rows: the causal conv + SiLU, its state [K-1, C] (fp32) advanced.
template <class A>
void conv_silu(const A* x, int64_t T, int64_t C, const float* w, int64_t K, float* state, A* y, cudaStream_t s);
// beta and decay are fp32 whatever the activations.
template <class A>
void delta_gates(A* mixed, int64_t T, int64_t C, int64_t key_heads, int64_t dk, float* beta, float* decay,
                 int64_t value_heads, const float* neg_exp_a, const float* dt_bias, cudaStream_t s);
// One sequence's rows through the gated delta rule (recurrent form), each
// value head's state [dk, dv] (fp32) advanced. mixed is [T, C] = q | k | v.
// `tiled`: value head v reads key head v % key_heads (GGUF's order).
template <class A>
void delta_rule(const A* mixed, int64_t C, const float* decay, const float* beta, int64_t T, int64_t key_heads,
                int64_t value_heads, int64_t dk, int64_t dv, bool tiled, float* state, A* out, cudaStream_t s);
// One sequence: causal GQA of q [T, heads, hd], row t at position
// positions[t] (device memory) attending to rows 0..positions[t] of K, V
// [.., kv_heads, hd]. No position exceeds p_last, which sizes the launch.
// `scratch` holds attention_scratch_floats(T, p_last, ...) floats (the spans
// of a split context; none needed where that is 0).
size_t attention_scratch_floats(int64_t T, int64_t p_last, int64_t heads, int64_t kv_heads, int64_t hd);
template <class A>
void attention(const A* q, int64_t T, const int64_t* positions, int64_t p_last, const A* K, const A* V, int64_t heads,
               int64_t kv_heads, int64_t hd, float scale, float* scratch, A* out, cudaStream_t s);
// Rows of k and v [T, row] to rows positions[t] (device memory) of the caches K and V.
template <class A>
void kv_append(A* K, A* V, const A* k, const A* v, int64_t T, int64_t row, const int64_t* positions, cudaStream_t s);

// MoE. Each token has `per_token` slots: its top k experts, then the shared
// expert (index E of the expert tables).
// ids/weights [T, per_token]: softmax over E logits, top k (ties to the lower
// index), weights renormalised over the k; slot k is the shared expert, its
// weight sigmoid(shared_logits[t]) (left alone where shared_logits is null).
void route_topk(const float* logits, const float* shared_logits, int64_t T, int64_t E, int64_t k, int64_t per_token,
                int32_t* ids, float* weights, cudaStream_t s);
// act [T * per_token, act_stride] = silu(gate_e x) * (up_e x) for each slot's expert e.
// `chunked`: the format every matrix of the tables is read in (common_format),
// with H and max_inter multiples of 8; null: value by value.
template <class A>
void expert_gate_up(const DevMatrix* gates, const DevMatrix* ups, const int32_t* ids, int64_t T, int64_t per_token,
                    const A* x, int64_t H, int64_t max_inter, A* act, const WeightFormat* chunked, cudaStream_t s);
// y [T, H] = sum over slots of weight * down_e act
template <class A>
void expert_down(const DevMatrix* downs, const int32_t* ids, const float* weights, int64_t T, int64_t per_token,
                 const A* act, int64_t max_inter, int64_t H, A* y, const WeightFormat* chunked, cudaStream_t s);

// Token choice over logits rows [n, V] of float (see TokenPick in backend.h):
// `params` [n] and the sparse logit adjustments `adjust` (row r's entries at
// adjust_start[r] .. adjust_start[r + 1]) on the device; `work` holds n * V
// floats; the chosen ids land in `out` [n].
struct PickParams {
  double temperature, top_p, min_p, u;
  int64_t top_k;
};
struct PickAdjust {
  int32_t id;
  float bias, subtract;
  int32_t repeat;  // 1: the repetition penalty applies
  float repetition_penalty;
};
void pick_tokens(const float* logits, int64_t n, int64_t V, const PickParams* params, const PickAdjust* adjust,
                 const int32_t* adjust_start, float* work, int32_t* out, cudaStream_t s);

// Throws lily::Error naming `what` when the last launch or call failed.
void check(cudaError_t e, const char* what);
// After each kernel launch: checks it and counts it (operations_queued).
void launched(const char* what);
// Kernel launches and copies queued since the process started.
uint64_t operations_queued();
// Counts a copy queued outside a kernel.
void count_operation();

}  // namespace lily::cuda
