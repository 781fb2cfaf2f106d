// Causal grouped-query attention of one sequence's queries over its KV cache,
// the softmax taken online over the positions so any context length fits.
//
// The split kernel: a block per (query, KV head, span of positions), so the
// KV rows a group of query heads shares are read once for all of them, and a
// long context is spread over many blocks (split-K). Each warp takes every
// fourth position of the span, a lane holds dims lane, lane + 32, ... of
// each query head of the group; the warps' running maxima and sums are
// merged in shared memory, then the spans' by a second kernel when there is
// more than one. A query's spans depend on its position alone (span_for),
// so a row gets the same result whatever else shares the call: a decode
// step batched or alone, a prompt fresh or resumed, queued or replayed from
// a recorded step. The positions are read from device memory, so a recorded
// step serves every later position: its grid is sized for the largest
// position it may meet, and spans past a query's own end return at once.
// Shapes outside its limits (more than 8 query heads per KV head, head_dim
// above 256) take the plain kernel: a block per (query, head).
#include <algorithm>

#include "lily/backend/cuda/device_math.cuh"
#include "lily/backend/cuda/kernels.h"
#include "lily/error.h"

namespace lily::cuda {

namespace {

template <class A>
__global__ void attention_kernel(const A* __restrict__ q, const int64_t* __restrict__ positions, const A* __restrict__ K,
                                 const A* __restrict__ V, int64_t heads, int64_t kv_heads, int64_t hd, float scale,
                                 A* __restrict__ out) {
  __shared__ float scratch[32];
  const int64_t t = blockIdx.x / heads, h = blockIdx.x % heads, kvh = h / (heads / kv_heads);
  const A* qv = q + (t * heads + h) * hd;
  const int64_t last = positions[t];  // attends to positions 0..last
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

constexpr int kSplitWarps = 4, kMaxGroup = 8;
constexpr int64_t kMaxSpans = 512;       // spans of one query
constexpr int64_t kBlocksPerLaunch = 4096;  // bounds a launch's scratch

// The span length of the query at position P: 64 positions (16 a warp),
// doubled until the query has at most kMaxSpans of them.
__host__ __device__ inline int64_t span_for(int64_t P) {
  int64_t span = 64;
  while ((P + span) / span > kMaxSpans) span *= 2;
  return span;
}
__host__ __device__ inline int64_t spans_for(int64_t P) {
  const int64_t span = span_for(P);
  return (P + span) / span;
}

// Where span sp of (t, kvh) keeps its group's unnormalised outputs, maxima and sums.
__device__ __forceinline__ float* span_slot(float* partial, int64_t t, int64_t kvh, int64_t sp, int64_t kv_heads,
                                            int64_t spans, int64_t hd) {
  return partial + ((t * kv_heads + kvh) * spans + sp) * kMaxGroup * (hd + 2);
}

// Queries t0 + blockIdx.x; gridDim.z is the span count of the largest position the launch may meet.
template <int D, class A>
__global__ void __launch_bounds__(kSplitWarps * 32)
    attention_split_kernel(const A* __restrict__ q, int64_t t0, const int64_t* __restrict__ positions, const A* __restrict__ K,
                           const A* __restrict__ V, int64_t heads, int64_t kv_heads, int64_t hd, float scale,
                           float* __restrict__ partial, A* __restrict__ out) {
  __shared__ float sm_acc[kSplitWarps][kMaxGroup][32 * D], sm_m[kSplitWarps][kMaxGroup], sm_l[kSplitWarps][kMaxGroup];
  const int64_t tl = blockIdx.x, t = t0 + tl, kvh = blockIdx.y, sp = blockIdx.z, group = heads / kv_heads;
  const int64_t P = positions[t], span = span_for(P), spans = (P + span) / span;  // positions 0..P are visible
  if (sp >= spans) return;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t begin = sp * span, end = min(begin + span, P + 1);
  float qv[kMaxGroup][D], acc[kMaxGroup][D], m[kMaxGroup], l[kMaxGroup];
#pragma unroll
  for (int g = 0; g < kMaxGroup; ++g) {
    m[g] = -INFINITY, l[g] = 0.f;
#pragma unroll
    for (int i = 0; i < D; ++i) {
      const int64_t d = lane + 32 * i;
      qv[g][i] = g < group && d < hd ? to_f(q[(t * heads + kvh * group + g) * hd + d]) : 0.f;
      acc[g][i] = 0.f;
    }
  }
  for (int64_t p = begin + warp; p < end; p += kSplitWarps) {
    const A* kp = K + (p * kv_heads + kvh) * hd;
    const A* vp = V + (p * kv_heads + kvh) * hd;
    float kd[D], vd[D];
#pragma unroll
    for (int i = 0; i < D; ++i) {
      const int64_t d = lane + 32 * i;
      kd[i] = d < hd ? to_f(kp[d]) : 0.f;
      vd[i] = d < hd ? to_f(vp[d]) : 0.f;
    }
#pragma unroll
    for (int g = 0; g < kMaxGroup; ++g) {
      if (g >= group) break;
      float part = 0.f;
#pragma unroll
      for (int i = 0; i < D; ++i) part += qv[g][i] * kd[i];
      const float score = warp_sum(part) * scale;
      const float mn = fmaxf(m[g], score), corr = expf(m[g] - mn), w = expf(score - mn);
      l[g] = l[g] * corr + w;
#pragma unroll
      for (int i = 0; i < D; ++i) acc[g][i] = acc[g][i] * corr + w * vd[i];
      m[g] = mn;
    }
  }
#pragma unroll
  for (int g = 0; g < kMaxGroup; ++g) {
#pragma unroll
    for (int i = 0; i < D; ++i) sm_acc[warp][g][lane + 32 * i] = acc[g][i];
    if (lane == 0) sm_m[warp][g] = m[g], sm_l[warp][g] = l[g];
  }
  __syncthreads();
  // merge the warps: thread x takes (head g, dim d) pairs
  float* slot = spans > 1 ? span_slot(partial, tl, kvh, sp, kv_heads, gridDim.z, hd) : nullptr;
  for (int64_t x = threadIdx.x; x < group * hd; x += blockDim.x) {
    const int64_t g = x / hd, d = x % hd;
    float M = -INFINITY;
    for (int w = 0; w < kSplitWarps; ++w) M = fmaxf(M, sm_m[w][g]);
    float L = 0.f, a = 0.f;
    if (M != -INFINITY)
      for (int w = 0; w < kSplitWarps; ++w) {
        const float f = sm_m[w][g] == -INFINITY ? 0.f : expf(sm_m[w][g] - M);
        L += sm_l[w][g] * f;
        a += sm_acc[w][g][d] * f;
      }
    if (slot) {
      slot[g * hd + d] = a;
      if (d == 0) slot[kMaxGroup * hd + g] = M, slot[kMaxGroup * hd + kMaxGroup + g] = L;
    } else {
      out[(t * heads + kvh * group + g) * hd + d] = from_f<A>(a / L);
    }
  }
}

// The spans of each (query, head) merged, for queries of more than one span:
// a block per pair, a thread per dim. `stride` is the launch's gridDim.z.
template <class A>
__global__ void attention_merge_kernel(const float* __restrict__ partial, int64_t t0, const int64_t* __restrict__ positions,
                                       int64_t heads, int64_t kv_heads, int64_t hd, int64_t stride, A* __restrict__ out) {
  const int64_t tl = blockIdx.x, t = t0 + tl, h = blockIdx.y, group = heads / kv_heads, kvh = h / group, g = h % group;
  const int64_t spans = spans_for(positions[t]);
  if (spans == 1) return;  // written by the split kernel
  float* base = const_cast<float*>(partial);
  float M = -INFINITY;
  for (int64_t sp = 0; sp < spans; ++sp) M = fmaxf(M, span_slot(base, tl, kvh, sp, kv_heads, stride, hd)[kMaxGroup * hd + g]);
  for (int64_t d = threadIdx.x; d < hd; d += blockDim.x) {
    float L = 0.f, a = 0.f;
    for (int64_t sp = 0; sp < spans; ++sp) {
      const float* slot = span_slot(base, tl, kvh, sp, kv_heads, stride, hd);
      const float f = expf(slot[kMaxGroup * hd + g] - M);  // every span of the query holds a position
      L += slot[kMaxGroup * hd + kMaxGroup + g] * f;
      a += slot[g * hd + d] * f;
    }
    out[(t * heads + h) * hd + d] = from_f<A>(a / L);
  }
}

bool split_fits(int64_t heads, int64_t kv_heads, int64_t hd) {
  return heads % kv_heads == 0 && heads / kv_heads <= kMaxGroup && hd <= 256;
}

// Queries per launch: as many as keep the launch within kBlocksPerLaunch blocks.
int64_t queries_per_launch(int64_t T, int64_t p_last, int64_t kv_heads) {
  const int64_t per_query = kv_heads * spans_for(p_last);
  return std::max<int64_t>(1, std::min<int64_t>(T, kBlocksPerLaunch / per_query));
}

}  // namespace

size_t attention_scratch_floats(int64_t T, int64_t p_last, int64_t heads, int64_t kv_heads, int64_t hd) {
  if (T == 0 || !split_fits(heads, kv_heads, hd)) return 0;
  const int64_t spans = spans_for(p_last);  // the most any query of the call has
  return spans > 1 ? static_cast<size_t>(queries_per_launch(T, p_last, kv_heads) * kv_heads * spans * kMaxGroup * (hd + 2))
                   : 0;
}

template <class A>
void attention(const A* q, int64_t T, const int64_t* positions, int64_t p_last, const A* K, const A* V, int64_t heads,
               int64_t kv_heads, int64_t hd, float scale, float* scratch, A* out, cudaStream_t s) {
  if (T == 0) return;
  if (hd > 512) throw Error("attention: head_dim " + std::to_string(hd) + " is above the kernel's 512");
  if (!split_fits(heads, kv_heads, hd)) {
    attention_kernel<A><<<static_cast<unsigned>(T * heads), 128, 0, s>>>(q, positions, K, V, heads, kv_heads, hd, scale, out);
    launched("attention");
    return;
  }
  const int64_t spans = spans_for(p_last), per_launch = queries_per_launch(T, p_last, kv_heads);
  if (spans > 1 && !scratch) throw Error("attention: a split over " + std::to_string(spans) + " spans needs scratch");
  for (int64_t t0 = 0; t0 < T; t0 += per_launch) {
    const int64_t n = std::min(per_launch, T - t0);
    const dim3 grid(static_cast<unsigned>(n), static_cast<unsigned>(kv_heads), static_cast<unsigned>(spans));
    auto split = [&](auto dims) {
      attention_split_kernel<decltype(dims)::value, A>
          <<<grid, kSplitWarps * 32, 0, s>>>(q, t0, positions, K, V, heads, kv_heads, hd, scale, scratch, out);
    };
    if (hd <= 32)
      split(std::integral_constant<int, 1>{});
    else if (hd <= 64)
      split(std::integral_constant<int, 2>{});
    else if (hd <= 128)
      split(std::integral_constant<int, 4>{});
    else
      split(std::integral_constant<int, 8>{});
    launched("attention");
    if (spans > 1) {
      const dim3 pairs(static_cast<unsigned>(n), static_cast<unsigned>(heads));
      attention_merge_kernel<A><<<pairs, static_cast<unsigned>((hd + 31) / 32 * 32), 0, s>>>(scratch, t0, positions, heads,
                                                                                           kv_heads, hd, spans, out);
      launched("attention merge");
    }
  }
}

namespace {
// Row t of k and of v [T, row] to row positions[t] of each cache: one
// launch for both, a thread per element pair.
template <class A>
__global__ void kv_append_kernel(A* __restrict__ K, A* __restrict__ V, const A* __restrict__ k, const A* __restrict__ v,
                                 int64_t T, int64_t row, const int64_t* __restrict__ positions) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= T * row) return;
  const int64_t t = i / row, at = positions[t] * row + i % row;
  K[at] = k[i];
  V[at] = v[i];
}
}  // namespace

template <class A>
void kv_append(A* K, A* V, const A* k, const A* v, int64_t T, int64_t row, const int64_t* positions, cudaStream_t s) {
  if (T == 0) return;
  kv_append_kernel<A><<<static_cast<unsigned>((T * row + 255) / 256), 256, 0, s>>>(K, V, k, v, T, row, positions);
  launched("kv_append");
}

template void attention<float>(const float*, int64_t, const int64_t*, int64_t, const float*, const float*, int64_t,
                               int64_t, int64_t, float, float*, float*, cudaStream_t);
template void attention<bf16>(const bf16*, int64_t, const int64_t*, int64_t, const bf16*, const bf16*, int64_t, int64_t,
                              int64_t, float, float*, bf16*, cudaStream_t);
template void kv_append<float>(float*, float*, const float*, const float*, int64_t, int64_t, const int64_t*,
                               cudaStream_t);
template void kv_append<bf16>(bf16*, bf16*, const bf16*, const bf16*, int64_t, int64_t, const int64_t*, cudaStream_t);

}  // namespace lily::cuda
