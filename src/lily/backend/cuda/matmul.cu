// Matrix products against weights in their stored form: a warp per output
// row, taking the tokens four at a time so each weight loaded (and
// dequantized) meets four inputs.
#include "lily/backend/cuda/device_math.cuh"
#include "lily/backend/cuda/kernels.h"

namespace lily::cuda {

namespace {

constexpr int kWarps = 8;

__global__ void matmul_kernel(DevMatrix w, const float* __restrict__ x, int64_t T, float* __restrict__ y) {
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
        if (j < nt) acc[j] += wv * x[(t0 + j) * n + c];
    }
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const float v = warp_sum(acc[j]);
      if (lane == 0 && j < nt) y[(t0 + j) * w.rows + r] = v;
    }
  }
}

__global__ void embed_kernel(DevMatrix table, const int32_t* __restrict__ ids, int64_t n, float* __restrict__ out) {
  const int64_t i = blockIdx.x;
  if (i >= n) return;
  for (int64_t c = threadIdx.x; c < table.cols; c += blockDim.x) out[i * table.cols + c] = weight_at(table, ids[i], c);
}

__global__ void gather_kernel(const float* __restrict__ x, int64_t cols, const int64_t* __restrict__ rows, int64_t n,
                              float* __restrict__ out) {
  const int64_t i = blockIdx.x;
  if (i >= n) return;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) out[i * cols + c] = x[rows[i] * cols + c];
}

}  // namespace

void matmul(const DevMatrix& w, const float* x, int64_t T, float* y, cudaStream_t s) {
  if (T == 0 || w.rows == 0) return;
  const unsigned blocks = static_cast<unsigned>((w.rows + kWarps - 1) / kWarps);
  matmul_kernel<<<blocks, kWarps * 32, 0, s>>>(w, x, T, y);
  check(cudaGetLastError(), "matmul");
}

void embed(const DevMatrix& table, const int32_t* ids, int64_t n, float* out, cudaStream_t s) {
  if (n == 0) return;
  embed_kernel<<<static_cast<unsigned>(n), 256, 0, s>>>(table, ids, n, out);
  check(cudaGetLastError(), "embed");
}

void gather_rows(const float* x, int64_t cols, const int64_t* rows, int64_t n, float* out, cudaStream_t s) {
  if (n == 0) return;
  gather_kernel<<<static_cast<unsigned>(n), 256, 0, s>>>(x, cols, rows, n, out);
  check(cudaGetLastError(), "gather_rows");
}

}  // namespace lily::cuda
