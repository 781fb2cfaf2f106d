// The next token chosen on the GPU, a block per row of logits, so that only
// the chosen ids cross to the host (see TokenPick in backend.h for the rule).
//
// Sorting the 248k logits of a row is what a host sampler does; here the cut
// points of the sorted order are found instead by bisection over a 64-bit key
// that orders tokens exactly as that sort does (logit descending, id
// ascending): each probe is one pass over the row counting, or summing the
// probabilities of, the tokens at or above it. The draw then walks the kept
// tokens in id order, as the CPU backend's reference does.
#include "lily/backend/cuda/device_math.cuh"
#include "lily/backend/cuda/kernels.h"

namespace lily::cuda {

namespace {

constexpr int kThreads = 1024;

// Larger key = earlier in the order (logit descending, id ascending).
__device__ __forceinline__ uint64_t order_key(float l, int64_t i) {
  uint32_t u = __float_as_uint(l);
  u = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
  return (static_cast<uint64_t>(u) << 32) | (0xFFFFFFFFu - static_cast<uint32_t>(i));
}

template <class T, class Op>
__device__ T block_reduce(T v, T* scratch, Op op) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  T r = scratch[0];
  for (int w = 1; w < (kThreads >> 5); ++w) r = op(r, scratch[w]);
  return r;
}

struct Row {
  const float* l;
  int64_t V;
  float mx;
  double inv_t;
  double* dscratch;
  uint64_t* kscratch;

  __device__ double prob(int64_t i) const { return exp((static_cast<double>(l[i]) - mx) * inv_t); }
  __device__ double count_ge(uint64_t K) const {
    double c = 0;
    for (int64_t i = threadIdx.x; i < V; i += kThreads) c += order_key(l[i], i) >= K ? 1.0 : 0.0;
    return block_reduce(c, dscratch, [](double a, double b) { return a + b; });
  }
  __device__ double mass_ge(uint64_t K) const {
    double m = 0;
    for (int64_t i = threadIdx.x; i < V; i += kThreads)
      if (order_key(l[i], i) >= K) m += prob(i);
    return block_reduce(m, dscratch, [](double a, double b) { return a + b; });
  }
  // The largest key K for which pred(K) holds (pred monotone: true up to a point).
  template <class Pred>
  __device__ uint64_t largest(Pred pred) const {
    uint64_t lo = 0, hi = ~0ull;
    while (lo < hi) {
      const uint64_t mid = lo + (hi - lo) / 2 + 1;
      if (pred(mid))
        lo = mid;
      else
        hi = mid - 1;
    }
    return lo;
  }
};

__global__ void pick_kernel(const float* __restrict__ logits, int64_t V, const PickParams* __restrict__ params,
                            const PickAdjust* __restrict__ adjust, const int32_t* __restrict__ adjust_start,
                            float* __restrict__ work, int32_t* __restrict__ out) {
  __shared__ double dscratch[32];
  __shared__ uint64_t kscratch[32];
  const int64_t row = blockIdx.x;
  const PickParams p = params[row];
  float* l = work + row * V;
  for (int64_t i = threadIdx.x; i < V; i += kThreads) l[i] = logits[row * V + i];
  __syncthreads();
  for (int32_t a = adjust_start[row] + threadIdx.x; a < adjust_start[row + 1]; a += kThreads) {
    const PickAdjust& d = adjust[a];
    float v = l[d.id] + d.bias;
    if (d.repeat) v = v > 0 ? v / d.repetition_penalty : v * d.repetition_penalty;
    l[d.id] = v - d.subtract;
  }
  __syncthreads();
  // the first place of the order: the largest logit, the lowest id among equals
  uint64_t top = 0;
  for (int64_t i = threadIdx.x; i < V; i += kThreads) {
    const uint64_t k = order_key(l[i], i);
    top = k > top ? k : top;
  }
  top = block_reduce(top, kscratch, [](uint64_t a, uint64_t b) { return a > b ? a : b; });
  const int64_t top_id = 0xFFFFFFFFu - static_cast<uint32_t>(top & 0xFFFFFFFFu);
  if (p.temperature <= 0) {
    if (threadIdx.x == 0) out[row] = static_cast<int32_t>(top_id);
    return;
  }
  Row r{l, V, l[top_id], 1.0 / p.temperature, dscratch, kscratch};
  // top_k: the key of the k-th token
  uint64_t cut = 0;
  if (p.top_k > 0 && p.top_k < V) {
    const double k = static_cast<double>(p.top_k);
    cut = r.largest([&](uint64_t K) { return r.count_ge(K) >= k; });
  }
  const double sum_k = r.mass_ge(cut);
  // top_p: the shortest prefix of the top_k holding top_p of their probability
  if (p.top_p < 1) {
    const double target = p.top_p * sum_k;
    const uint64_t cp = r.largest([&](uint64_t K) { return r.mass_ge(K) >= target; });
    cut = cp > cut ? cp : cut;
  }
  // min_p: the kept tokens' probability at least min_p times the first's (which is exp(0) = 1)
  if (p.min_p > 0) {
    uint64_t smallest = ~0ull;
    for (int64_t i = threadIdx.x; i < V; i += kThreads)
      if (r.prob(i) >= p.min_p) {
        const uint64_t k = order_key(l[i], i);
        smallest = k < smallest ? k : smallest;
      }
    smallest = block_reduce(smallest, kscratch, [](uint64_t a, uint64_t b) { return a < b ? a : b; });
    cut = smallest > cut ? smallest : cut;
  }
  // the draw: u * total, over the kept tokens in id order; each thread holds a contiguous run of ids
  const double total = r.mass_ge(cut), target = p.u * total;
  const int64_t per = (V + kThreads - 1) / kThreads, b = threadIdx.x * per, e = b + per < V ? b + per : V;
  double mine = 0;
  int64_t last_kept = -1;
  for (int64_t i = b; i < e; ++i)
    if (order_key(l[i], i) >= cut) mine += r.prob(i), last_kept = i;
  __shared__ double before[kThreads];
  before[threadIdx.x] = mine;
  __syncthreads();
  if (threadIdx.x == 0) {
    double acc = 0;
    for (int t = 0; t < kThreads; ++t) {
      const double v = before[t];
      before[t] = acc;
      acc += v;
    }
  }
  __syncthreads();
  __shared__ unsigned long long found;
  if (threadIdx.x == 0) found = ~0ull;
  __syncthreads();
  if (target >= before[threadIdx.x] && target < before[threadIdx.x] + mine) {
    double acc = before[threadIdx.x];
    for (int64_t i = b; i < e; ++i)
      if (order_key(l[i], i) >= cut) {
        acc += r.prob(i);
        if (target < acc) {
          atomicMin(&found, static_cast<unsigned long long>(i));
          break;
        }
      }
  }
  // rounding can leave the target at the very end: the last kept id
  int64_t last = last_kept;
  last = block_reduce(static_cast<long long>(last), reinterpret_cast<long long*>(kscratch),
                      [](long long a, long long c) { return a > c ? a : c; });
  __syncthreads();
  if (threadIdx.x == 0) out[row] = static_cast<int32_t>(found != ~0ull ? static_cast<int64_t>(found) : last);
}

}  // namespace

void pick_tokens(const float* logits, int64_t n, int64_t V, const PickParams* params, const PickAdjust* adjust,
                 const int32_t* adjust_start, float* work, int32_t* out, cudaStream_t s) {
  if (n == 0) return;
  pick_kernel<<<static_cast<unsigned>(n), kThreads, 0, s>>>(logits, V, params, adjust, adjust_start, work, out);
  launched("pick_tokens");
}

}  // namespace lily::cuda
