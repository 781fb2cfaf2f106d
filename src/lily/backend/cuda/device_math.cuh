// Device helpers shared by the kernels: element loads of every weight type
// (dequantizing MLX's packed values in the load), activation loads and
// stores, warp and block sums.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "lily/backend/cuda/device_matrix.h"

namespace lily::cuda {

__device__ __forceinline__ float load_elem(const uint8_t* p, ElemType t, int64_t i) {
  switch (t) {
    case ElemType::F16: return __half2float(reinterpret_cast<const __half*>(p)[i]);
    case ElemType::BF16: return __bfloat162float(reinterpret_cast<const __nv_bfloat16*>(p)[i]);
    default: return reinterpret_cast<const float*>(p)[i];
  }
}

// W[r, c] as a float; a packed value is scale * q + bias of its group.
__device__ __forceinline__ float weight_at(const DevMatrix& m, int64_t r, int64_t c) {
  const uint8_t* row = m.data + r * m.row_bytes;
  if (m.bits == 0) return load_elem(row, m.dtype, c);
  const int64_t bit = c * m.bits;
  const uint8_t* p = row + (bit >> 3);
  const int shift = static_cast<int>(bit & 7);
  uint32_t v = p[0] >> shift;
  if (shift + m.bits > 8) v |= static_cast<uint32_t>(p[1]) << (8 - shift);
  const float q = static_cast<float>(v & ((1u << m.bits) - 1u));
  const int64_t g = r * (m.cols / m.group_size) + c / m.group_size;
  return load_elem(m.scales, m.scale_dtype, g) * q + load_elem(m.biases, m.scale_dtype, g);
}

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// The sum of v over the block (blockDim.x a multiple of 32, at most 1024);
// every thread gets it. `scratch` holds 32 floats of shared memory.
__device__ __forceinline__ float block_sum(float v, float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  v = warp_sum(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float s = lane < warps ? scratch[lane] : 0.f;
  return warp_sum(s);
}

// Activations are float or bf16 (Tensor::dtype); kernels read them as float
// and round once when they store.
using bf16 = __nv_bfloat16;
__device__ __forceinline__ float to_f(float v) { return v; }
__device__ __forceinline__ float to_f(bf16 v) { return __bfloat162float(v); }
template <class A>
__device__ __forceinline__ A from_f(float v);
template <>
__device__ __forceinline__ float from_f<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ bf16 from_f<bf16>(float v) {
  return __float2bfloat16_rn(v);
}

__device__ __forceinline__ float sigmoidf(float x) { return 1.f / (1.f + expf(-x)); }
__device__ __forceinline__ float siluf(float x) { return x / (1.f + expf(-x)); }
__device__ __forceinline__ float softplusf(float x) { return x > 20.f ? x : log1pf(expf(x)); }

}  // namespace lily::cuda
