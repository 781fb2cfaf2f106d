// Norms, activations, the query/gate split and rotary embedding: the element
// work between the products, one block per row or a thread per element.
// Each reads its activations as float and rounds once when it stores.
#include "lily/backend/cuda/device_math.cuh"
#include "lily/backend/cuda/kernels.h"
#include "lily/error.h"

namespace lily::cuda {

namespace {

template <class A>
__global__ void rmsnorm_kernel(const A* __restrict__ x, int64_t dim, const float* __restrict__ w, float eps, A* y) {
  __shared__ float scratch[32];
  const A* xr = x + blockIdx.x * dim;
  float ss = 0.f;
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) ss += to_f(xr[i]) * to_f(xr[i]);
  const float inv = rsqrtf(block_sum(ss, scratch) / static_cast<float>(dim) + eps);
  A* yr = y + blockIdx.x * dim;
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) yr[i] = from_f<A>(to_f(xr[i]) * inv * w[i]);
}

// x += y, then h = rmsnorm(x): the sum rounded to A once, as add stores it,
// and the norm read from that rounded sum in rmsnorm_kernel's order (the same
// block size), so the fused step equals the two ops.
template <class A>
__global__ void add_rmsnorm_kernel(A* x, const A* __restrict__ y, int64_t dim, const float* __restrict__ w, float eps,
                                   A* __restrict__ h) {
  __shared__ float scratch[32];
  A* xr = x + blockIdx.x * dim;
  const A* yr = y + blockIdx.x * dim;
  float ss = 0.f;
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
    const A v = from_f<A>(to_f(xr[i]) + to_f(yr[i]));
    xr[i] = v;
    ss += to_f(v) * to_f(v);
  }
  const float inv = rsqrtf(block_sum(ss, scratch) / static_cast<float>(dim) + eps);
  A* hr = h + blockIdx.x * dim;
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) hr[i] = from_f<A>(to_f(xr[i]) * inv * w[i]);
}

template <class A>
__global__ void gated_rmsnorm_kernel(const A* __restrict__ x, const A* __restrict__ z, int64_t dim,
                                     const float* __restrict__ w, float eps, A* y) {
  __shared__ float scratch[32];
  const A* xr = x + blockIdx.x * dim;
  const A* zr = z + blockIdx.x * dim;
  float ss = 0.f;
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) ss += to_f(xr[i]) * to_f(xr[i]);
  const float inv = rsqrtf(block_sum(ss, scratch) / static_cast<float>(dim) + eps);
  A* yr = y + blockIdx.x * dim;
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x)
    yr[i] = from_f<A>(to_f(xr[i]) * inv * w[i] * siluf(to_f(zr[i])));
}

template <class A>
__global__ void add_kernel(A* x, const A* __restrict__ y, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) x[i] = from_f<A>(to_f(x[i]) + to_f(y[i]));
}

template <class A>
__global__ void sigmoid_mul_kernel(A* x, const A* __restrict__ g, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) x[i] = from_f<A>(to_f(x[i]) * sigmoidf(to_f(g[i])));
}

template <class A>
__global__ void split_kernel(const A* __restrict__ qg, int64_t heads, int64_t hd, A* q, A* gate) {
  const int64_t th = blockIdx.x;  // token * heads + head
  const A* src = qg + th * 2 * hd;
  for (int64_t i = threadIdx.x; i < hd; i += blockDim.x) {
    q[th * hd + i] = src[i];
    gate[th * hd + i] = src[hd + i];
  }
}

// NeoX pairs (j, j + rotary/2) of each head, at the row's position.
template <class A>
__global__ void rope_kernel(A* x, int64_t heads, int64_t hd, int64_t rotary, const float* __restrict__ inv_freq,
                            const int64_t* __restrict__ positions) {
  const int64_t t = blockIdx.x, half = rotary / 2;
  const float pos = static_cast<float>(positions[t]);
  for (int64_t i = threadIdx.x; i < heads * half; i += blockDim.x) {
    const int64_t h = i / half, j = i % half;
    A* v = x + (t * heads + h) * hd;
    const float angle = pos * inv_freq[j];
    float sn, cs;
    sincosf(angle, &sn, &cs);
    const float a = to_f(v[j]), b = to_f(v[j + half]);
    v[j] = from_f<A>(a * cs - b * sn);
    v[j + half] = from_f<A>(b * cs + a * sn);
  }
}

// A thread per channel: the K-1 previous inputs come from the state, which
// then holds this call's last K-1.
template <class A>
__global__ void conv_silu_kernel(const A* __restrict__ x, int64_t T, int64_t C, const float* __restrict__ w, int64_t K,
                                 float* state, A* __restrict__ y) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= C) return;
  const float* wc = w + c * K;
  auto input = [&](int64_t t) {  // t from -(K-1): the state rows, oldest first
    return t < 0 ? state[(K - 1 + t) * C + c] : to_f(x[t * C + c]);
  };
  for (int64_t t = 0; t < T; ++t) {
    float acc = 0.f;
    for (int64_t j = 0; j < K; ++j) acc += wc[j] * input(t - (K - 1) + j);
    y[t * C + c] = from_f<A>(siluf(acc));
  }
  // the new state: the last K-1 inputs (reading the old state before it is overwritten)
  float keep[8];
  const int64_t n = K - 1 < 8 ? K - 1 : 8;
  for (int64_t j = 0; j < n; ++j) keep[j] = input(T - (K - 1) + j);
  for (int64_t j = 0; j < n; ++j) state[j * C + c] = keep[j];
}

// A block per (token, head): l2 norms of the q and k heads; the first key
// head's block also computes the token's beta and decay.
template <class A>
__global__ void delta_gates_kernel(A* mixed, int64_t C, int64_t key_heads, int64_t dk, float* beta, float* decay,
                                   int64_t value_heads, const float* __restrict__ neg_exp_a,
                                   const float* __restrict__ dt_bias, float q_scale) {
  __shared__ float scratch[32];
  const int64_t t = blockIdx.x / key_heads, h = blockIdx.x % key_heads;
  A* row = mixed + t * C;
  for (int part = 0; part < 2; ++part) {
    A* v = row + part * key_heads * dk + h * dk;
    float ss = 0.f;
    for (int64_t i = threadIdx.x; i < dk; i += blockDim.x) ss += to_f(v[i]) * to_f(v[i]);
    const float inv = rsqrtf(block_sum(ss, scratch) + 1e-6f) * (part == 0 ? q_scale : 1.f);
    for (int64_t i = threadIdx.x; i < dk; i += blockDim.x) v[i] = from_f<A>(to_f(v[i]) * inv);
  }
  if (h == 0)
    for (int64_t j = threadIdx.x; j < value_heads; j += blockDim.x) {
      beta[t * value_heads + j] = sigmoidf(beta[t * value_heads + j]);
      decay[t * value_heads + j] = neg_exp_a[j] * softplusf(decay[t * value_heads + j] + dt_bias[j]);
    }
}

// A block per (token, head) over q's heads, then k's: the head rmsnormed
// and rotated, each value rounded where the separate ops store it and the
// sums taken in rmsnorm_kernel's order (the same block size), so this equals
// split, rmsnorm and rope one after another. k is rewritten in place: the
// head is read whole into shared memory before any of it is written.
constexpr int kNormThreads = 256;
template <class A>
__global__ void __launch_bounds__(kNormThreads)
    attention_inputs_kernel(const A* __restrict__ qg, A* k, int64_t heads, int64_t kv_heads, int64_t hd,
                            const float* __restrict__ q_norm, const float* __restrict__ k_norm, float eps,
                            int64_t rotary, const float* __restrict__ inv_freq, const int64_t* __restrict__ positions,
                            A* __restrict__ q, A* __restrict__ gate) {
  extern __shared__ float head[];  // [hd]
  __shared__ float scratch[32];
  const int64_t t = blockIdx.x, h = blockIdx.y;
  const bool is_q = h < heads;
  const A* src = is_q ? qg + (t * heads + h) * 2 * hd : k + (t * kv_heads + (h - heads)) * hd;
  A* dst = is_q ? q + (t * heads + h) * hd : k + (t * kv_heads + (h - heads)) * hd;
  const float* w = is_q ? q_norm : k_norm;
  float ss = 0.f;
  for (int64_t i = threadIdx.x; i < hd; i += blockDim.x) {
    const float v = to_f(src[i]);
    ss += v * v;
    if (is_q) gate[(t * heads + h) * hd + i] = src[hd + i];
  }
  const float inv = rsqrtf(block_sum(ss, scratch) / static_cast<float>(hd) + eps);
  for (int64_t i = threadIdx.x; i < hd; i += blockDim.x) head[i] = to_f(from_f<A>(to_f(src[i]) * inv * w[i]));
  __syncthreads();
  const int64_t half = rotary / 2;
  const float pos = static_cast<float>(positions[t]);
  for (int64_t i = threadIdx.x; i < hd; i += blockDim.x) {
    float out = head[i];
    if (i < 2 * half) {
      const int64_t j = i < half ? i : i - half;
      float sn, cs;
      sincosf(pos * inv_freq[j], &sn, &cs);
      const float a = head[j], b = head[j + half];
      out = i < half ? a * cs - b * sn : b * cs + a * sn;
    }
    dst[i] = from_f<A>(out);
  }
}

// conv_silu and delta_gates for one sequence's single row: a block per key
// head convolves its q and k channels and a 1/key_heads share of the v
// channels, advancing their conv state, then l2-norms its q and k heads from
// the rounded conv outputs in delta_gates_kernel's order (the same block
// size); the first block computes beta and decay.
constexpr int kGateThreads = 128;
template <class A>
__global__ void __launch_bounds__(kGateThreads)
    conv_gates_kernel(const A* __restrict__ x, int64_t C, const float* __restrict__ w, int64_t K, float* state,
                      A* __restrict__ y, int64_t key_heads, int64_t dk, float* beta, float* decay, int64_t value_heads,
                      const float* __restrict__ neg_exp_a, const float* __restrict__ dt_bias, float q_scale) {
  extern __shared__ float qk[];  // q [dk] | k [dk]: the rounded conv outputs
  __shared__ float scratch[32];
  const int64_t h = blockIdx.x, KD = key_heads * dk, share = (C - 2 * KD) / key_heads;
  auto convolve = [&](int64_t c) {
    const float* wc = w + c * K;
    float acc = 0.f;
    for (int64_t j = 0; j < K - 1; ++j) acc += wc[j] * state[j * C + c];
    const float in = to_f(x[c]);
    acc += wc[K - 1] * in;
    for (int64_t j = 0; j + 1 < K - 1; ++j) state[j * C + c] = state[(j + 1) * C + c];
    if (K > 1) state[(K - 2) * C + c] = in;
    return from_f<A>(siluf(acc));
  };
  for (int64_t i = threadIdx.x; i < share; i += blockDim.x) {
    const int64_t c = 2 * KD + h * share + i;
    y[c] = convolve(c);
  }
  for (int part = 0; part < 2; ++part)
    for (int64_t i = threadIdx.x; i < dk; i += blockDim.x) qk[part * dk + i] = to_f(convolve(part * KD + h * dk + i));
  for (int part = 0; part < 2; ++part) {
    float ss = 0.f;
    for (int64_t i = threadIdx.x; i < dk; i += blockDim.x) ss += qk[part * dk + i] * qk[part * dk + i];
    const float inv = rsqrtf(block_sum(ss, scratch) + 1e-6f) * (part == 0 ? q_scale : 1.f);
    for (int64_t i = threadIdx.x; i < dk; i += blockDim.x) y[part * KD + h * dk + i] = from_f<A>(qk[part * dk + i] * inv);
  }
  if (h == 0)
    for (int64_t j = threadIdx.x; j < value_heads; j += blockDim.x) {
      beta[j] = sigmoidf(beta[j]);
      decay[j] = neg_exp_a[j] * softplusf(decay[j] + dt_bias[j]);
    }
}

unsigned blocks_of(int64_t n, int per) { return static_cast<unsigned>((n + per - 1) / per); }

}  // namespace

template <class A>
void rmsnorm(const A* x, int64_t rows, int64_t dim, const float* w, float eps, A* y, cudaStream_t s) {
  if (rows == 0) return;
  rmsnorm_kernel<A><<<static_cast<unsigned>(rows), kNormThreads, 0, s>>>(x, dim, w, eps, y);
  launched("rmsnorm");
}

template <class A>
void add_rmsnorm(A* x, const A* y, int64_t rows, int64_t dim, const float* w, float eps, A* h, cudaStream_t s) {
  if (rows == 0) return;
  add_rmsnorm_kernel<A><<<static_cast<unsigned>(rows), 256, 0, s>>>(x, y, dim, w, eps, h);
  launched("add_rmsnorm");
}

template <class A>
void gated_rmsnorm(const A* x, const A* z, int64_t rows, int64_t dim, const float* w, float eps, A* y, cudaStream_t s) {
  if (rows == 0) return;
  gated_rmsnorm_kernel<A><<<static_cast<unsigned>(rows), 128, 0, s>>>(x, z, dim, w, eps, y);
  launched("gated_rmsnorm");
}

template <class A>
void add(A* x, const A* y, int64_t n, cudaStream_t s) {
  if (n == 0) return;
  add_kernel<A><<<blocks_of(n, 256), 256, 0, s>>>(x, y, n);
  launched("add");
}

template <class A>
void sigmoid_mul(A* x, const A* gate, int64_t n, cudaStream_t s) {
  if (n == 0) return;
  sigmoid_mul_kernel<A><<<blocks_of(n, 256), 256, 0, s>>>(x, gate, n);
  launched("sigmoid_mul");
}

template <class A>
void split_query_gate(const A* qg, int64_t T, int64_t heads, int64_t hd, A* q, A* gate, cudaStream_t s) {
  if (T == 0) return;
  split_kernel<A><<<static_cast<unsigned>(T * heads), 128, 0, s>>>(qg, heads, hd, q, gate);
  launched("split_query_gate");
}

template <class A>
void rope(A* x, int64_t T, int64_t heads, int64_t hd, int64_t rotary, const float* inv_freq, const int64_t* positions,
          cudaStream_t s) {
  if (T == 0 || rotary == 0) return;
  rope_kernel<A><<<static_cast<unsigned>(T), 128, 0, s>>>(x, heads, hd, rotary, inv_freq, positions);
  launched("rope");
}

template <class A>
void conv_silu(const A* x, int64_t T, int64_t C, const float* w, int64_t K, float* state, A* y, cudaStream_t s) {
  if (T == 0) return;
  if (K < 1 || K > 9) throw Error("conv_silu: a kernel of " + std::to_string(K) + " taps (the kernel takes 1 to 9)");
  conv_silu_kernel<A><<<blocks_of(C, 128), 128, 0, s>>>(x, T, C, w, K, state, y);
  launched("conv_silu");
}

template <class A>
void delta_gates(A* mixed, int64_t T, int64_t C, int64_t key_heads, int64_t dk, float* beta, float* decay,
                 int64_t value_heads, const float* neg_exp_a, const float* dt_bias, cudaStream_t s) {
  if (T == 0) return;
  const float q_scale = 1.0f / sqrtf(static_cast<float>(dk));
  delta_gates_kernel<A><<<static_cast<unsigned>(T * key_heads), kGateThreads, 0, s>>>(mixed, C, key_heads, dk, beta, decay,
                                                                             value_heads, neg_exp_a, dt_bias, q_scale);
  launched("delta_gates");
}

template <class A>
void attention_inputs(const A* qg, A* k, int64_t T, int64_t heads, int64_t kv_heads, int64_t hd, const float* q_norm,
                      const float* k_norm, float eps, int64_t rotary, const float* inv_freq, const int64_t* positions,
                      A* q, A* gate, cudaStream_t s) {
  if (T == 0) return;
  const dim3 grid(static_cast<unsigned>(T), static_cast<unsigned>(heads + kv_heads));
  attention_inputs_kernel<A><<<grid, kNormThreads, static_cast<size_t>(hd) * sizeof(float), s>>>(
      qg, k, heads, kv_heads, hd, q_norm, k_norm, eps, rotary, inv_freq, positions, q, gate);
  launched("attention_inputs");
}

template <class A>
void conv_gates(const A* x, int64_t C, const float* w, int64_t K, float* state, A* y, int64_t key_heads, int64_t dk,
                float* beta, float* decay, int64_t value_heads, const float* neg_exp_a, const float* dt_bias,
                cudaStream_t s) {
  if (K < 1 || K > 9) throw Error("conv_gates: a kernel of " + std::to_string(K) + " taps (the kernel takes 1 to 9)");
  if ((C - 2 * key_heads * dk) % key_heads != 0)
    throw Error("conv_gates: the value channels do not split evenly over " + std::to_string(key_heads) + " key heads");
  const float q_scale = 1.0f / sqrtf(static_cast<float>(dk));
  conv_gates_kernel<A><<<static_cast<unsigned>(key_heads), kGateThreads, static_cast<size_t>(2 * dk) * sizeof(float), s>>>(
      x, C, w, K, state, y, key_heads, dk, beta, decay, value_heads, neg_exp_a, dt_bias, q_scale);
  launched("conv_gates");
}

#define LILY_ELEMENTWISE(A)                                                                                         \
  template void rmsnorm<A>(const A*, int64_t, int64_t, const float*, float, A*, cudaStream_t);                       \
  template void gated_rmsnorm<A>(const A*, const A*, int64_t, int64_t, const float*, float, A*, cudaStream_t);       \
  template void add_rmsnorm<A>(A*, const A*, int64_t, int64_t, const float*, float, A*, cudaStream_t);               \
  template void add<A>(A*, const A*, int64_t, cudaStream_t);                                                        \
  template void sigmoid_mul<A>(A*, const A*, int64_t, cudaStream_t);                                                \
  template void split_query_gate<A>(const A*, int64_t, int64_t, int64_t, A*, A*, cudaStream_t);                     \
  template void rope<A>(A*, int64_t, int64_t, int64_t, int64_t, const float*, const int64_t*, cudaStream_t);        \
  template void conv_silu<A>(const A*, int64_t, int64_t, const float*, int64_t, float*, A*, cudaStream_t);          \
  template void delta_gates<A>(A*, int64_t, int64_t, int64_t, int64_t, float*, float*, int64_t, const float*,     \
                               const float*, cudaStream_t);                                                  \
  template void attention_inputs<A>(const A*, A*, int64_t, int64_t, int64_t, int64_t, const float*, const float*,   \
                                    float, int64_t, const float*, const int64_t*, A*, A*, cudaStream_t);           \
  template void conv_gates<A>(const A*, int64_t, const float*, int64_t, float*, A*, int64_t, int64_t, float*,       \
                              float*, int64_t, const float*, const float*, cudaStream_t);
LILY_ELEMENTWISE(float)
LILY_ELEMENTWISE(bf16)

}  // namespace lily::cuda
