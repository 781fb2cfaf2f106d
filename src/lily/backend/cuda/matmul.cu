// Matrix products against weights in their stored form: a warp per output
// row, taking the tokens four at a time so each weight loaded (and
// dequantized) meets four inputs.
#include "lily/backend/cuda/device_math.cuh"
#include "lily/backend/cuda/kernels.h"

namespace lily::cuda {

namespace {

constexpr int kWarps = 8;

template <class X, class Y>
__global__ void matmul_kernel(DevMatrix w, const X* __restrict__ x, int64_t T, Y* __restrict__ y) {
  const int64_t r = static_cast<int64_t>(blockIdx.x) * kWarps + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (r >= w.rows) return;
  const int64_t n = w.cols;
  for (int64_t t0 = 0; t0 < T; t0 += 4) {
    const int64_t nt = T - t0 < 4 ? T - t0 : 4;
    float acc[4] = {0.f, 0.f, 0.f, 0.f};
    for (int64_t c = lane; c < n; c += 32) {
      const float wv = weight_at(w, r, c);
#pragma unroll
      for (int j = 0; j < 4; ++j)
        if (j < nt) acc[j] += wv * to_f(x[(t0 + j) * n + c]);
    }
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const float v = warp_sum(acc[j]);
      if (lane == 0 && j < nt) y[(t0 + j) * w.rows + r] = from_f<Y>(v);
    }
  }
}

template <class A>
__global__ void embed_kernel(DevMatrix table, const int32_t* __restrict__ ids, int64_t n, A* __restrict__ out) {
  const int64_t i = blockIdx.x;
  if (i >= n) return;
  for (int64_t c = threadIdx.x; c < table.cols; c += blockDim.x)
    out[i * table.cols + c] = from_f<A>(weight_at(table, ids[i], c));
}

template <class A>
__global__ void gather_kernel(const A* __restrict__ x, int64_t cols, const int64_t* __restrict__ rows, int64_t n,
                              A* __restrict__ out) {
  const int64_t i = blockIdx.x;
  if (i >= n) return;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) out[i * cols + c] = x[rows[i] * cols + c];
}

__global__ void to_bf16_kernel(const float* __restrict__ x, int64_t n, bf16* __restrict__ y) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) y[i] = __float2bfloat16_rn(x[i]);
}

__global__ void to_float_kernel(const bf16* __restrict__ x, int64_t n, float* __restrict__ y) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) y[i] = __bfloat162float(x[i]);
}

}  // namespace

template <class X, class Y>
void matmul(const DevMatrix& w, const X* x, int64_t T, Y* y, cudaStream_t s) {
  if (T == 0 || w.rows == 0) return;
  const unsigned blocks = static_cast<unsigned>((w.rows + kWarps - 1) / kWarps);
  matmul_kernel<X, Y><<<blocks, kWarps * 32, 0, s>>>(w, x, T, y);
  check(cudaGetLastError(), "matmul");
}

template <class A>
void embed(const DevMatrix& table, const int32_t* ids, int64_t n, A* out, cudaStream_t s) {
  if (n == 0) return;
  embed_kernel<A><<<static_cast<unsigned>(n), 256, 0, s>>>(table, ids, n, out);
  check(cudaGetLastError(), "embed");
}

template <class A>
void gather_rows(const A* x, int64_t cols, const int64_t* rows, int64_t n, A* out, cudaStream_t s) {
  if (n == 0) return;
  gather_kernel<A><<<static_cast<unsigned>(n), 256, 0, s>>>(x, cols, rows, n, out);
  check(cudaGetLastError(), "gather_rows");
}

void to_bf16(const float* x, int64_t n, bf16* y, cudaStream_t s) {
  if (n == 0) return;
  to_bf16_kernel<<<static_cast<unsigned>((n + 255) / 256), 256, 0, s>>>(x, n, y);
  check(cudaGetLastError(), "to_bf16");
}

void to_float(const bf16* x, int64_t n, float* y, cudaStream_t s) {
  if (n == 0) return;
  to_float_kernel<<<static_cast<unsigned>((n + 255) / 256), 256, 0, s>>>(x, n, y);
  check(cudaGetLastError(), "to_float");
}

template void matmul<float, float>(const DevMatrix&, const float*, int64_t, float*, cudaStream_t);
template void matmul<bf16, bf16>(const DevMatrix&, const bf16*, int64_t, bf16*, cudaStream_t);
template void matmul<bf16, float>(const DevMatrix&, const bf16*, int64_t, float*, cudaStream_t);
template void embed<float>(const DevMatrix&, const int32_t*, int64_t, float*, cudaStream_t);
template void embed<bf16>(const DevMatrix&, const int32_t*, int64_t, bf16*, cudaStream_t);
template void gather_rows<float>(const float*, int64_t, const int64_t*, int64_t, float*, cudaStream_t);
template void gather_rows<bf16>(const bf16*, int64_t, const int64_t*, int64_t, bf16*, cudaStream_t);

}  // namespace lily::cuda
