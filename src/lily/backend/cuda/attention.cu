// Causal grouped-query attention of one sequence's queries over its KV cache:
// a block per (query, head) with a thread per dimension, the softmax taken
// online over the positions, so any context length fits.
#include "lily/backend/cuda/device_math.cuh"
#include "lily/backend/cuda/kernels.h"
#include "lily/error.h"

namespace lily::cuda {

namespace {

template <class A>
__global__ void attention_kernel(const A* __restrict__ q, int64_t p0, const A* __restrict__ K, const A* __restrict__ V,
                                 int64_t heads, int64_t kv_heads, int64_t hd, float scale, A* __restrict__ out) {
  __shared__ float scratch[32];
  const int64_t t = blockIdx.x / heads, h = blockIdx.x % heads, kvh = h / (heads / kv_heads);
  const A* qv = q + (t * heads + h) * hd;
  const int64_t last = p0 + t;  // attends to positions 0..last
  float m = -INFINITY, l = 0.f;
  float acc[4] = {0.f, 0.f, 0.f, 0.f};  // dims threadIdx.x + 128 * i
  float qd[4];
  for (int i = 0; i < 4; ++i) {
    const int64_t d = threadIdx.x + 128 * i;
    qd[i] = d < hd ? to_f(qv[d]) : 0.f;
  }
  for (int64_t p = 0; p <= last; ++p) {
    const A* kp = K + (p * kv_heads + kvh) * hd;
    float part = 0.f;
    for (int i = 0; i < 4; ++i) {
      const int64_t d = threadIdx.x + 128 * i;
      if (d < hd) part += qd[i] * to_f(kp[d]);
    }
    const float score = block_sum(part, scratch) * scale;
    const float mn = fmaxf(m, score), corr = expf(m - mn), w = expf(score - mn);
    l = l * corr + w;
    const A* vp = V + (p * kv_heads + kvh) * hd;
    for (int i = 0; i < 4; ++i) {
      const int64_t d = threadIdx.x + 128 * i;
      if (d < hd) acc[i] = acc[i] * corr + w * to_f(vp[d]);
    }
    m = mn;
  }
  for (int i = 0; i < 4; ++i) {
    const int64_t d = threadIdx.x + 128 * i;
    if (d < hd) out[(t * heads + h) * hd + d] = from_f<A>(acc[i] / l);
  }
}

}  // namespace

template <class A>
void attention(const A* q, int64_t T, int64_t p0, const A* K, const A* V, int64_t heads, int64_t kv_heads, int64_t hd,
               float scale, A* out, cudaStream_t s) {
  if (T == 0) return;
  if (hd > 512) throw Error("attention: head_dim " + std::to_string(hd) + " is above the kernel's 512");
  attention_kernel<A><<<static_cast<unsigned>(T * heads), 128, 0, s>>>(q, p0, K, V, heads, kv_heads, hd, scale, out);
  check(cudaGetLastError(), "attention");
}

template void attention<float>(const float*, int64_t, int64_t, const float*, const float*, int64_t, int64_t, int64_t,
                               float, float*, cudaStream_t);
template void attention<bf16>(const bf16*, int64_t, int64_t, const bf16*, const bf16*, int64_t, int64_t, int64_t, float,
                              bf16*, cudaStream_t);

}  // namespace lily::cuda
