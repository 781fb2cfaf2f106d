// Device helpers shared by the kernels: element loads of every weight type
// (dequantizing MLX's packed values in the load), activation loads and
// stores, warp and block sums.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

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

// W[r, 8 * c8 .. 8 * c8 + 7] into w.
template <WeightFormat F>
__device__ __forceinline__ void load8(const DevMatrix& m, int64_t r, int64_t c8, float w[8]) {
  const uint8_t* row = m.data + r * m.row_bytes;
  if constexpr (F == WeightFormat::F32) {
    const float4 a = reinterpret_cast<const float4*>(row)[2 * c8], b = reinterpret_cast<const float4*>(row)[2 * c8 + 1];
    w[0] = a.x, w[1] = a.y, w[2] = a.z, w[3] = a.w, w[4] = b.x, w[5] = b.y, w[6] = b.z, w[7] = b.w;
  } else if constexpr (F == WeightFormat::F16 || F == WeightFormat::BF16) {
    const uint4 v = reinterpret_cast<const uint4*>(row)[c8];
    const uint32_t u[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      if constexpr (F == WeightFormat::BF16) {
        w[2 * i] = __uint_as_float(u[i] << 16);
        w[2 * i + 1] = __uint_as_float(u[i] & 0xffff0000u);
      } else {
        const __half2 h = *reinterpret_cast<const __half2*>(&u[i]);
        const float2 f = __half22float2(h);
        w[2 * i] = f.x, w[2 * i + 1] = f.y;
      }
    }
  } else {
    // MLX packs each row's values little-endian, `bits` apiece: eight values are `bits` bytes
    uint64_t v;
    if constexpr (F == WeightFormat::Q4) {
      v = reinterpret_cast<const uint32_t*>(row)[c8];
    } else if constexpr (F == WeightFormat::Q8) {
      const uint2 p = reinterpret_cast<const uint2*>(row)[c8];
      v = p.x | (static_cast<uint64_t>(p.y) << 32);
    } else {
      const uint16_t* p = reinterpret_cast<const uint16_t*>(row + 6 * c8);
      v = p[0] | (static_cast<uint64_t>(p[1]) << 16) | (static_cast<uint64_t>(p[2]) << 32);
    }
    constexpr int bits = F == WeightFormat::Q4 ? 4 : F == WeightFormat::Q6 ? 6 : 8;
    // 32-bit division: a row's columns fit, and 64-bit division is a long call on the GPU
    const int64_t g = r * (m.cols / m.group_size) + static_cast<int32_t>(c8 * 8) / static_cast<int32_t>(m.group_size);
    const float scale = load_elem(m.scales, m.scale_dtype, g), bias = load_elem(m.biases, m.scale_dtype, g);
#pragma unroll
    for (int i = 0; i < 8; ++i) w[i] = scale * static_cast<float>((v >> (bits * i)) & ((1u << bits) - 1u)) + bias;
  }
}

// Calls fn(s8, w) for each run of eight weights w of chunk ci of row r
// (kChunkValues<F> values), s8 the run's index in eights along the row: one
// load of the stored form, then the runs unpacked from registers.
template <WeightFormat F, class Fn>
__device__ __forceinline__ void for_each8(const DevMatrix& m, int64_t r, int64_t ci, Fn&& fn) {
  if constexpr (F == WeightFormat::Q4W) {
    const uint8_t* row = m.data + r * m.row_bytes;
    const uint4 v = reinterpret_cast<const uint4*>(row)[ci];
    const int64_t g = r * (m.cols / m.group_size) + static_cast<int32_t>(ci * 32) / static_cast<int32_t>(m.group_size);
    const float scale = load_elem(m.scales, m.scale_dtype, g), bias = load_elem(m.biases, m.scale_dtype, g);
    const uint32_t u[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      float w[8];
#pragma unroll
      for (int i = 0; i < 8; ++i) w[i] = scale * static_cast<float>((u[q] >> (4 * i)) & 15u) + bias;
      fn(ci * 4 + q, w);
    }
  } else {
    float w[8];
    load8<F>(m, r, ci, w);
    fn(ci, w);
  }
}

// Eight consecutive activations x[8 * c8 ..] as floats.
__device__ __forceinline__ void load8(const float* x, int64_t c8, float v[8]) {
  const float4 a = reinterpret_cast<const float4*>(x)[2 * c8], b = reinterpret_cast<const float4*>(x)[2 * c8 + 1];
  v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
}
__device__ __forceinline__ void load8(const __nv_bfloat16* x, int64_t c8, float v[8]) {
  const uint4 p = reinterpret_cast<const uint4*>(x)[c8];
  const uint32_t u[4] = {p.x, p.y, p.z, p.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    v[2 * i] = __uint_as_float(u[i] << 16);
    v[2 * i + 1] = __uint_as_float(u[i] & 0xffff0000u);
  }
}

// Calls fn(std::integral_constant<WeightFormat, f>{}).
template <class Fn>
void with_format(WeightFormat f, Fn&& fn) {
  switch (f) {
    case WeightFormat::F32: return fn(std::integral_constant<WeightFormat, WeightFormat::F32>{});
    case WeightFormat::F16: return fn(std::integral_constant<WeightFormat, WeightFormat::F16>{});
    case WeightFormat::BF16: return fn(std::integral_constant<WeightFormat, WeightFormat::BF16>{});
    case WeightFormat::Q4: return fn(std::integral_constant<WeightFormat, WeightFormat::Q4>{});
    case WeightFormat::Q6: return fn(std::integral_constant<WeightFormat, WeightFormat::Q6>{});
    case WeightFormat::Q8: return fn(std::integral_constant<WeightFormat, WeightFormat::Q8>{});
    case WeightFormat::Q4W: return fn(std::integral_constant<WeightFormat, WeightFormat::Q4W>{});
  }
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
