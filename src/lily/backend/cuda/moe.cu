// The sparse MoE block on the GPU: routing (softmax, top k, renormalised
// weights) and the experts as gathered products, where each slot of a token
// (its k routed experts, then the shared one) reads its expert's rows
// through a table of device matrices.
#include "lily/backend/cuda/device_math.cuh"
#include "lily/backend/cuda/kernels.h"
#include "lily/error.h"

namespace lily::cuda {

namespace {

constexpr int kWarps = 8;

// A warp per token: each lane holds the logits of experts lane, lane + 32,
// ...; the softmax's max and sum and each of the k picks are warp
// reductions. Ties go to the lower index, as on the CPU.
constexpr int kMaxExpertsPerLane = 16;  // E <= 512

__global__ void route_kernel(const float* __restrict__ logits, const float* __restrict__ shared_logits, int64_t T,
                             int64_t E, int64_t k, int64_t per_token, int32_t* ids, float* weights) {
  const int64_t t = static_cast<int64_t>(blockIdx.x) * (blockDim.x >> 5) + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (t >= T) return;
  const float* l = logits + t * E;
  float v[kMaxExpertsPerLane];
  float mx = -INFINITY;
#pragma unroll
  for (int i = 0; i < kMaxExpertsPerLane; ++i) {
    const int64_t e = lane + 32 * i;
    v[i] = e < E ? l[e] : -INFINITY;
    mx = fmaxf(mx, v[i]);
  }
  mx = warp_max(mx);
  float sum = 0.f;
#pragma unroll
  for (int i = 0; i < kMaxExpertsPerLane; ++i)
    if (lane + 32 * i < E) sum += expf(v[i] - mx);
  sum = warp_sum(sum);
  float top = 0.f, mine = 0.f;  // lane j keeps pick j's probability
  uint32_t taken = 0;            // bit i: expert lane + 32 i is picked
  for (int64_t j = 0; j < k; ++j) {
    // this lane's best untaken expert, then the warp's: the larger logit, or the lower index on a tie
    float bl = -INFINITY;
    int32_t best = INT32_MAX;
#pragma unroll
    for (int i = 0; i < kMaxExpertsPerLane; ++i) {
      const int32_t e = lane + 32 * i;
      if (e < E && !((taken >> i) & 1u) && (best == INT32_MAX || v[i] > bl)) bl = v[i], best = e;
    }
    for (int o = 16; o > 0; o >>= 1) {
      const float ol = __shfl_xor_sync(0xffffffffu, bl, o);
      const int32_t oe = __shfl_xor_sync(0xffffffffu, best, o);
      if (oe != INT32_MAX && (best == INT32_MAX || ol > bl || (ol == bl && oe < best))) bl = ol, best = oe;
    }
    if ((best & 31) == lane) taken |= 1u << (best >> 5);
    const float p = expf(bl - mx) / sum;
    if (lane == j) mine = p;
    top += p;
    if (lane == 0) ids[t * per_token + j] = best;
  }
  if (lane < k) weights[t * per_token + lane] = mine / top;
  for (int64_t j = k + lane; j < per_token; j += 32) ids[t * per_token + j] = static_cast<int32_t>(E);  // the shared expert
  if (lane == 0 && shared_logits && k < per_token) weights[t * per_token + k] = sigmoidf(shared_logits[t]);
}

// Lane's share of row r of m . v (warp_sum gives the dot): a chunk of
// kChunkValues<F> weights a load in format F where the tables allow it
// (Chunked), else value by value.
struct ValueByValue {};
template <WeightFormat F>
struct Chunked {};

template <class A>
__device__ __forceinline__ float row_part(ValueByValue, const DevMatrix& m, int64_t r, const A* __restrict__ v, int lane) {
  float acc = 0.f;
  for (int64_t c = lane; c < m.cols; c += 32) acc += weight_at(m, r, c) * to_f(v[c]);
  return acc;
}

template <WeightFormat F, class A>
__device__ __forceinline__ float row_part(Chunked<F>, const DevMatrix& m, int64_t r, const A* __restrict__ v, int lane) {
  float acc = 0.f;
  const int64_t chunks = m.cols / kChunkValues<F>;
#pragma unroll 4
  for (int64_t ci = lane; ci < chunks; ci += 32)
    for_each8<F>(m, r, ci, [&](int64_t s8, const float wv[8]) {
      float vv[8];
      load8(v, s8, vv);
#pragma unroll
      for (int i = 0; i < 8; ++i) acc += wv[i] * vv[i];
    });
  return acc;
}

// A warp per (slot, row of the expert's gate and up); the block's slot's
// matrices are read from the tables once, into shared memory.
template <class Read, class A>
__global__ void __launch_bounds__(kWarps * 32)
    gate_up_kernel(const DevMatrix* __restrict__ gates, const DevMatrix* __restrict__ ups,
                   const int32_t* __restrict__ ids, int64_t slots, int64_t per_token, const A* __restrict__ x,
                   int64_t H, int64_t max_inter, A* __restrict__ act) {
  __shared__ DevMatrix gu[2];
  const int64_t slot = blockIdx.x;
  const int64_t r = static_cast<int64_t>(blockIdx.y) * kWarps + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (slot >= slots) return;
  if (threadIdx.x < 2) {
    const int32_t e = ids[slot];
    gu[threadIdx.x] = threadIdx.x == 0 ? gates[e] : ups[e];
  }
  __syncthreads();
  if (r >= gu[0].rows) return;
  const A* xt = x + (slot / per_token) * H;
  const float a = warp_sum(row_part(Read{}, gu[0], r, xt, lane));
  const float b = warp_sum(row_part(Read{}, gu[1], r, xt, lane));
  if (lane == 0) act[slot * max_inter + r] = from_f<A>(siluf(a) * b);
}

// A warp per (token, output row): the weighted sum over the token's slots,
// each lane summing its share of every slot before the one warp sum. The
// token's matrices and weights are read from the tables once a block.
constexpr int kMaxSlots = 33;  // top k <= 32, and the shared expert
template <class Read, class A>
__global__ void __launch_bounds__(kWarps * 32)
    down_kernel(const DevMatrix* __restrict__ downs, const int32_t* __restrict__ ids,
                const float* __restrict__ weights, int64_t per_token, const A* __restrict__ act, int64_t max_inter,
                int64_t H, A* __restrict__ y) {
  __shared__ DevMatrix d[kMaxSlots];
  __shared__ float wt[kMaxSlots];
  const int64_t t = blockIdx.x;
  const int64_t r = static_cast<int64_t>(blockIdx.y) * kWarps + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  for (int64_t j = threadIdx.x; j < per_token; j += blockDim.x) {
    d[j] = downs[ids[t * per_token + j]];
    wt[j] = weights[t * per_token + j];
  }
  __syncthreads();
  if (r >= H) return;
  float total = 0.f;
  for (int64_t j = 0; j < per_token; ++j)
    total += wt[j] * row_part(Read{}, d[j], r, act + (t * per_token + j) * max_inter, lane);
  total = warp_sum(total);
  if (lane == 0) y[t * H + r] = from_f<A>(total);
}

}  // namespace

void route_topk(const float* logits, const float* shared_logits, int64_t T, int64_t E, int64_t k, int64_t per_token,
                int32_t* ids, float* weights, cudaStream_t s) {
  if (T == 0) return;
  if (E > 32 * kMaxExpertsPerLane || k > 32 || k > E || per_token > kMaxSlots)
    throw Error("route_topk: " + std::to_string(E) + " experts, top " + std::to_string(k) +
                " is outside the kernel's limits (512 experts, k <= 32)");
  route_kernel<<<static_cast<unsigned>((T + 3) / 4), 128, 0, s>>>(logits, shared_logits, T, E, k, per_token, ids,
                                                                   weights);
  launched("route_topk");
}

template <class A>
void expert_gate_up(const DevMatrix* gates, const DevMatrix* ups, const int32_t* ids, int64_t T, int64_t per_token,
                    const A* x, int64_t H, int64_t max_inter, A* act, const WeightFormat* chunked, cudaStream_t s) {
  if (T == 0) return;
  const int64_t slots = T * per_token;
  const dim3 grid(static_cast<unsigned>(slots), static_cast<unsigned>((max_inter + kWarps - 1) / kWarps));
  if (chunked)
    with_format(*chunked, [&](auto fmt) {
      gate_up_kernel<Chunked<decltype(fmt)::value>, A>
          <<<grid, kWarps * 32, 0, s>>>(gates, ups, ids, slots, per_token, x, H, max_inter, act);
    });
  else
    gate_up_kernel<ValueByValue, A><<<grid, kWarps * 32, 0, s>>>(gates, ups, ids, slots, per_token, x, H, max_inter, act);
  launched("expert_gate_up");
}

template <class A>
void expert_down(const DevMatrix* downs, const int32_t* ids, const float* weights, int64_t T, int64_t per_token,
                 const A* act, int64_t max_inter, int64_t H, A* y, const WeightFormat* chunked, cudaStream_t s) {
  if (T == 0) return;
  const dim3 grid(static_cast<unsigned>(T), static_cast<unsigned>((H + kWarps - 1) / kWarps));
  if (chunked)
    with_format(*chunked, [&](auto fmt) {
      down_kernel<Chunked<decltype(fmt)::value>, A>
          <<<grid, kWarps * 32, 0, s>>>(downs, ids, weights, per_token, act, max_inter, H, y);
    });
  else
    down_kernel<ValueByValue, A><<<grid, kWarps * 32, 0, s>>>(downs, ids, weights, per_token, act, max_inter, H, y);
  launched("expert_down");
}

#define LILY_MOE(A)                                                                                                  \
  template void expert_gate_up<A>(const DevMatrix*, const DevMatrix*, const int32_t*, int64_t, int64_t, const A*,     \
                                  int64_t, int64_t, A*, const WeightFormat*, cudaStream_t);                          \
  template void expert_down<A>(const DevMatrix*, const int32_t*, const float*, int64_t, int64_t, const A*, int64_t,   \
                               int64_t, A*, const WeightFormat*, cudaStream_t);
LILY_MOE(float)
LILY_MOE(bf16)

}  // namespace lily::cuda
