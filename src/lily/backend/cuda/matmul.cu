// Matrix products against weights in their stored form: a warp per output
// row. Rows whose layout allows it are read eight values per load (see
// load8) with the tokens taken NT at a time, so each weight loaded and
// dequantized meets NT inputs, and the products of one input go out as one
// launch; other rows go value by value, a launch per matrix.
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

// The products of one launch: up to kMaxProducts matrices of one format
// against the same inputs, their rows laid end to end over the grid's warps
// (a layer's projections of its normed input go out as one launch).
struct Products {
  DevMatrix w[kMaxProducts];
  void* y[kMaxProducts];
  bool y_float[kMaxProducts];  // the output is fp32 (a wide tensor), else the activation type
  int64_t first_row[kMaxProducts + 1];
  int n;
};

// NT tokens per pass over the row (the last pass may have fewer).
template <WeightFormat F, int NT, class X>
__global__ void __launch_bounds__(kWarps * 32) matmul_chunked_kernel(Products p, const X* __restrict__ x, int64_t T) {
  int64_t r = static_cast<int64_t>(blockIdx.x) * kWarps + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (r >= p.first_row[p.n]) return;
  int j = 0;
  while (r >= p.first_row[j + 1]) ++j;
  r -= p.first_row[j];
  const DevMatrix& w = p.w[j];
  const int64_t chunks = w.cols / kChunkValues<F>;
  for (int64_t t0 = 0; t0 < T; t0 += NT) {
    const int64_t nt = T - t0 < NT ? T - t0 : NT;
    float acc[NT];
#pragma unroll
    for (int k = 0; k < NT; ++k) acc[k] = 0.f;
#pragma unroll 4
    for (int64_t ci = lane; ci < chunks; ci += 32)
      for_each8<F>(w, r, ci, [&](int64_t s8, const float wv[8]) {
#pragma unroll
        for (int k = 0; k < NT; ++k)
          if (k < nt) {
            float xv[8];
            load8(x + (t0 + k) * w.cols, s8, xv);
#pragma unroll
            for (int i = 0; i < 8; ++i) acc[k] += wv[i] * xv[i];
          }
      });
#pragma unroll
    for (int k = 0; k < NT; ++k) {
      const float v = warp_sum(acc[k]);
      if (lane == 0 && k < nt) {
        const int64_t at = (t0 + k) * w.rows + r;
        if (p.y_float[j])
          static_cast<float*>(p.y[j])[at] = v;
        else
          static_cast<X*>(p.y[j])[at] = from_f<X>(v);
      }
    }
  }
}

// One launch of the chunked kernel over the products, NT picked by T.
template <WeightFormat F, class X>
void launch_chunked(const Products& p, const X* x, int64_t T, cudaStream_t s) {
  const unsigned blocks = static_cast<unsigned>((p.first_row[p.n] + kWarps - 1) / kWarps);
  if (T == 1)
    matmul_chunked_kernel<F, 1, X><<<blocks, kWarps * 32, 0, s>>>(p, x, T);
  else if (T == 2)
    matmul_chunked_kernel<F, 2, X><<<blocks, kWarps * 32, 0, s>>>(p, x, T);
  else if (T <= 4)
    matmul_chunked_kernel<F, 4, X><<<blocks, kWarps * 32, 0, s>>>(p, x, T);
  else
    matmul_chunked_kernel<F, 8, X><<<blocks, kWarps * 32, 0, s>>>(p, x, T);
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
  const ProductJob job{w, y, std::is_same_v<Y, float>};
  matmul_batch(&job, 1, x, T, s);
}

template <class X>
void matmul_batch(const ProductJob* jobs, int n, const X* x, int64_t T, cudaStream_t s) {
  if (T == 0 || n == 0) return;
  // one launch where every matrix is read in chunks of one format; else a launch each
  WeightFormat f = WeightFormat::F32;
  const bool aligned = reinterpret_cast<uintptr_t>(x) % 16 == 0;
  bool together = n <= kMaxProducts && aligned;
  for (int i = 0; i < n && together; ++i) together = jobs[i].w.cols == jobs[0].w.cols;
  if (together && common_format(n, [&](int64_t i) -> const DevMatrix& { return jobs[i].w; }, &f)) {
    Products p{};
    p.n = n;
    for (int i = 0; i < n; ++i) {
      p.w[i] = jobs[i].w;
      p.y[i] = jobs[i].y;
      p.y_float[i] = jobs[i].y_float;
      p.first_row[i + 1] = p.first_row[i] + jobs[i].w.rows;
    }
    if (p.first_row[n] == 0) return;
    with_format(f, [&](auto fmt) { launch_chunked<decltype(fmt)::value, X>(p, x, T, s); });
    launched("matmul");
    return;
  }
  // a launch each: chunked where the matrix allows it, else value by value
  for (int i = 0; i < n; ++i) {
    const DevMatrix& w = jobs[i].w;
    if (w.rows == 0) continue;
    WeightFormat fi;
    if (aligned && chunked_format(w, &fi)) {
      Products p{};
      p.n = 1;
      p.w[0] = w;
      p.y[0] = jobs[i].y;
      p.y_float[0] = jobs[i].y_float;
      p.first_row[1] = w.rows;
      with_format(fi, [&](auto fmt) { launch_chunked<decltype(fmt)::value, X>(p, x, T, s); });
      launched("matmul");
      continue;
    }
    const unsigned blocks = static_cast<unsigned>((w.rows + kWarps - 1) / kWarps);
    if (jobs[i].y_float)
      matmul_kernel<X, float><<<blocks, kWarps * 32, 0, s>>>(w, x, T, static_cast<float*>(jobs[i].y));
    else
      matmul_kernel<X, X><<<blocks, kWarps * 32, 0, s>>>(w, x, T, static_cast<X*>(jobs[i].y));
    launched("matmul");
  }
}

template <class A>
void embed(const DevMatrix& table, const int32_t* ids, int64_t n, A* out, cudaStream_t s) {
  if (n == 0) return;
  embed_kernel<A><<<static_cast<unsigned>(n), 256, 0, s>>>(table, ids, n, out);
  launched("embed");
}

template <class A>
void gather_rows(const A* x, int64_t cols, const int64_t* rows, int64_t n, A* out, cudaStream_t s) {
  if (n == 0) return;
  gather_kernel<A><<<static_cast<unsigned>(n), 256, 0, s>>>(x, cols, rows, n, out);
  launched("gather_rows");
}

void to_bf16(const float* x, int64_t n, bf16* y, cudaStream_t s) {
  if (n == 0) return;
  to_bf16_kernel<<<static_cast<unsigned>((n + 255) / 256), 256, 0, s>>>(x, n, y);
  launched("to_bf16");
}

void to_float(const bf16* x, int64_t n, float* y, cudaStream_t s) {
  if (n == 0) return;
  to_float_kernel<<<static_cast<unsigned>((n + 255) / 256), 256, 0, s>>>(x, n, y);
  launched("to_float");
}

template void matmul<float, float>(const DevMatrix&, const float*, int64_t, float*, cudaStream_t);
template void matmul<bf16, bf16>(const DevMatrix&, const bf16*, int64_t, bf16*, cudaStream_t);
template void matmul<bf16, float>(const DevMatrix&, const bf16*, int64_t, float*, cudaStream_t);
template void matmul_batch<float>(const ProductJob*, int, const float*, int64_t, cudaStream_t);
template void matmul_batch<bf16>(const ProductJob*, int, const bf16*, int64_t, cudaStream_t);
template void embed<float>(const DevMatrix&, const int32_t*, int64_t, float*, cudaStream_t);
template void embed<bf16>(const DevMatrix&, const int32_t*, int64_t, bf16*, cudaStream_t);
template void gather_rows<float>(const float*, int64_t, const int64_t*, int64_t, float*, cudaStream_t);
template void gather_rows<bf16>(const bf16*, int64_t, const int64_t*, int64_t, bf16*, cudaStream_t);

}  // namespace lily::cuda
