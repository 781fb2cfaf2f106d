// The gated delta rule, token by token: a block per value head, a thread per
// column of the head's [dk, dv] state, q and k of the step in shared memory.
//   S = S * exp(g_t);  d = (v_t - S^T k_t) * beta_t;  S += k_t d^T;  o_t = S^T q_t
// The recurrent form computes the same function as the CPU's chunked prefill.
#include "lily/backend/cuda/device_math.cuh"
#include "lily/backend/cuda/kernels.h"
#include "lily/error.h"

namespace lily::cuda {

namespace {

template <class A>
__global__ void delta_rule_kernel(const A* __restrict__ mixed, int64_t C, const float* __restrict__ decay,
                                  const float* __restrict__ beta, int64_t T, int64_t key_heads, int64_t value_heads,
                                  int64_t dk, int64_t dv, bool tiled, float* state, A* __restrict__ out) {
  extern __shared__ float qk[];  // q [dk] | k [dk]
  const int64_t h = blockIdx.x, hk = tiled ? h % key_heads : h / (value_heads / key_heads);
  const int64_t KD = key_heads * dk, VD = value_heads * dv;
  float* S = state + h * dk * dv;
  for (int64_t t = 0; t < T; ++t) {
    const A* row = mixed + t * C;
    for (int64_t i = threadIdx.x; i < dk; i += blockDim.x) {
      qk[i] = to_f(row[hk * dk + i]);
      qk[dk + i] = to_f(row[KD + hk * dk + i]);
    }
    __syncthreads();
    const float g = expf(decay[t * value_heads + h]), b = beta[t * value_heads + h];
    for (int64_t j = threadIdx.x; j < dv; j += blockDim.x) {
      float kv = 0.f;
      for (int64_t i = 0; i < dk; ++i) {
        const float s = S[i * dv + j] * g;
        S[i * dv + j] = s;
        kv += s * qk[dk + i];
      }
      const float d = (to_f(row[2 * KD + h * dv + j]) - kv) * b;
      float o = 0.f;
      for (int64_t i = 0; i < dk; ++i) {
        const float s = S[i * dv + j] + qk[dk + i] * d;
        S[i * dv + j] = s;
        o += s * qk[i];
      }
      out[t * VD + h * dv + j] = from_f<A>(o);
    }
    __syncthreads();
  }
}

}  // namespace

template <class A>
void delta_rule(const A* mixed, int64_t C, const float* decay, const float* beta, int64_t T, int64_t key_heads,
                int64_t value_heads, int64_t dk, int64_t dv, bool tiled, float* state, A* out, cudaStream_t s) {
  if (T == 0) return;
  if (key_heads <= 0 || value_heads % key_heads != 0)
    throw Error("delta_rule: " + std::to_string(value_heads) + " value heads do not share " +
                std::to_string(key_heads) + " key heads evenly");
  const int threads = dv >= 256 ? 256 : static_cast<int>((dv + 31) / 32 * 32);
  const size_t shared = static_cast<size_t>(2 * dk) * sizeof(float);
  delta_rule_kernel<A><<<static_cast<unsigned>(value_heads), threads, shared, s>>>(mixed, C, decay, beta, T, key_heads,
                                                                                value_heads, dk, dv, tiled, state, out);
  check(cudaGetLastError(), "delta_rule");
}

template void delta_rule<float>(const float*, int64_t, const float*, const float*, int64_t, int64_t, int64_t, int64_t,
                                int64_t, bool, float*, float*, cudaStream_t);
template void delta_rule<bf16>(const bf16*, int64_t, const float*, const float*, int64_t, int64_t, int64_t, int64_t,
                               int64_t, bool, float*, bf16*, cudaStream_t);

}  // namespace lily::cuda
