// The gated delta rule, token by token: a thread per column of a value
// head's [dk, dv] state, q and k of the step in shared memory.
//   S = S * exp(g_t);  d = (v_t - S^T k_t) * beta_t;  S += k_t d^T;  o_t = S^T q_t
// Each column's update needs only that column, so a thread keeps its column
// in registers across the call's tokens (read once, written once) and a
// warp of 32 columns is a block: a decode step of 32 heads of 128 columns is
// 128 blocks. Key widths other than 8, 16, 32, 64 and 128 take the plain one,
// which reads the state from memory at every step. The recurrent form
// computes the same function as the CPU's chunked prefill.
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

// DK is the key width exactly, so the column's loops unroll into registers.
template <int DK, class A>
__global__ void __launch_bounds__(32)
    delta_rule_columns_kernel(const A* __restrict__ mixed, int64_t C, const float* __restrict__ decay,
                              const float* __restrict__ beta, int64_t T, int64_t key_heads, int64_t value_heads,
                              int64_t dv, bool tiled, float* state, A* __restrict__ out) {
  __shared__ float q[DK], k[DK];
  const int64_t h = blockIdx.x, hk = tiled ? h % key_heads : h / (value_heads / key_heads);
  const int j = blockIdx.y * 32 + threadIdx.x, stride = static_cast<int>(dv);
  const int64_t KD = key_heads * DK, VD = value_heads * dv;
  const bool live = j < dv;
  float* column = state + h * DK * dv + (live ? j : 0);
  float s[DK];
#pragma unroll
  for (int i = 0; i < DK; ++i) s[i] = live ? column[i * stride] : 0.f;
  for (int64_t t = 0; t < T; ++t) {
    const A* row = mixed + t * C;
    for (int i = threadIdx.x; i < DK; i += 32) {
      q[i] = to_f(row[hk * DK + i]);
      k[i] = to_f(row[KD + hk * DK + i]);
    }
    __syncwarp();
    const float g = expf(decay[t * value_heads + h]), b = beta[t * value_heads + h];
    float kv = 0.f;
#pragma unroll
    for (int i = 0; i < DK; ++i) {
      s[i] *= g;
      kv += s[i] * k[i];
    }
    const float d = ((live ? to_f(row[2 * KD + h * dv + j]) : 0.f) - kv) * b;
    float o = 0.f;
#pragma unroll
    for (int i = 0; i < DK; ++i) {
      s[i] += k[i] * d;
      o += s[i] * q[i];
    }
    if (live) out[t * VD + h * dv + j] = from_f<A>(o);
    __syncwarp();
  }
  if (live)
#pragma unroll
    for (int i = 0; i < DK; ++i) column[i * stride] = s[i];
}

}  // namespace

template <class A>
void delta_rule(const A* mixed, int64_t C, const float* decay, const float* beta, int64_t T, int64_t key_heads,
                int64_t value_heads, int64_t dk, int64_t dv, bool tiled, float* state, A* out, cudaStream_t s) {
  if (T == 0) return;
  if (key_heads <= 0 || value_heads % key_heads != 0)
    throw Error("delta_rule: " + std::to_string(value_heads) + " value heads do not share " +
                std::to_string(key_heads) + " key heads evenly");
  const dim3 columns(static_cast<unsigned>(value_heads), static_cast<unsigned>((dv + 31) / 32));
  auto columns_kernel = [&](auto width) {
    delta_rule_columns_kernel<decltype(width)::value, A>
        <<<columns, 32, 0, s>>>(mixed, C, decay, beta, T, key_heads, value_heads, dv, tiled, state, out);
  };
  if (dk == 8) {
    columns_kernel(std::integral_constant<int, 8>{});
  } else if (dk == 16) {
    columns_kernel(std::integral_constant<int, 16>{});
  } else if (dk == 32) {
    columns_kernel(std::integral_constant<int, 32>{});
  } else if (dk == 64) {
    columns_kernel(std::integral_constant<int, 64>{});
  } else if (dk == 128) {
    columns_kernel(std::integral_constant<int, 128>{});
  } else {
    const int threads = dv >= 256 ? 256 : static_cast<int>((dv + 31) / 32 * 32);
    const size_t shared = static_cast<size_t>(2 * dk) * sizeof(float);
    delta_rule_kernel<A><<<static_cast<unsigned>(value_heads), threads, shared, s>>>(
        mixed, C, decay, beta, T, key_heads, value_heads, dk, dv, tiled, state, out);
  }
  launched("delta_rule");
}

template void delta_rule<float>(const float*, int64_t, const float*, const float*, int64_t, int64_t, int64_t, int64_t,
                                int64_t, bool, float*, float*, cudaStream_t);
template void delta_rule<bf16>(const bf16*, int64_t, const float*, const float*, int64_t, int64_t, int64_t, int64_t,
                               int64_t, bool, float*, bf16*, cudaStream_t);

}  // namespace lily::cuda
