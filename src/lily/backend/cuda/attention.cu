// Causal grouped-query attention of one sequence's queries over its KV cache:
// a block per (query, head) with a thread per dimension, the softmax taken
// online over the positions, so any context length fits.
#include "lily/backend/cuda/device_math.cuh"
#include "lily/backend/cuda/kernels.h"
#include "lily/error.h"

namespace lily::cuda {

namespace {

__global__ void attention_kernel(const float* __restrict__ q, int64_t p0, const float* __restrict__ K,
                                 const float* __restrict__ V, int64_t heads, int64_t kv_heads, int64_t hd, float scale,
                                 float* __restrict__ out) {
  __shared__ float scratch[32];
  const int64_t t = blockIdx.x / heads, h = blockIdx.x % heads, kvh = h / (heads / kv_heads);
  const float* qv = q + (t * heads + h) * hd;
  const int64_t last = p0 + t;  // attends to positions 0..last
  float m = -INFINITY, l = 0.f;
  float acc[4] = {0.f, 0.f, 0.f, 0.f};  // dims threadIdx.x + 128 * i
  float qd[4];
  for (int i = 0; i < 4; ++i) {
    const int64_t d = threadIdx.x + 128 * i;
    qd[i] = d < hd ? qv[d] : 0.f;
  }
  for (int64_t p = 0; p <= last; ++p) {
    const float* kp = K + (p * kv_heads + kvh) * hd;
    float part = 0.f;
    for (int i = 0; i < 4; ++i) {
      const int64_t d = threadIdx.x + 128 * i;
      if (d < hd) part += qd[i] * kp[d];
    }
    const float score = block_sum(part, scratch) * scale;
    const float mn = fmaxf(m, score), corr = expf(m - mn), w = expf(score - mn);
    l = l * corr + w;
    const float* vp = V + (p * kv_heads + kvh) * hd;
    for (int i = 0; i < 4; ++i) {
      const int64_t d = threadIdx.x + 128 * i;
      if (d < hd) acc[i] = acc[i] * corr + w * vp[d];
    }
    m = mn;
  }
  for (int i = 0; i < 4; ++i) {
    const int64_t d = threadIdx.x + 128 * i;
    if (d < hd) out[(t * heads + h) * hd + d] = acc[i] / l;
  }
}

}  // namespace

void attention(const float* q, int64_t T, int64_t p0, const float* K, const float* V, int64_t heads, int64_t kv_heads,
               int64_t hd, float scale, float* out, cudaStream_t s) {
  if (T == 0) return;
  if (hd > 512) throw Error("attention: head_dim " + std::to_string(hd) + " is above the kernel's 512");
  attention_kernel<<<static_cast<unsigned>(T * heads), 128, 0, s>>>(q, p0, K, V, heads, kv_heads, hd, scale, out);
  check(cudaGetLastError(), "attention");
}

}  // namespace lily::cuda
