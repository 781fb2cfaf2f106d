// The sparse MoE block on the GPU: routing (softmax, top k, renormalised
// weights) and the experts as gathered products, where each slot of a token
// (its k routed experts, then the shared one) reads its expert's rows
// through a table of device matrices.
#include "lily/backend/cuda/device_math.cuh"
#include "lily/backend/cuda/kernels.h"

namespace lily::cuda {

namespace {

constexpr int kWarps = 8;

// A thread per token: E is a few hundred, k a handful.
__global__ void route_kernel(const float* __restrict__ logits, int64_t T, int64_t E, int64_t k, int64_t per_token,
                             int32_t* ids, float* weights) {
  const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= T) return;
  const float* l = logits + t * E;
  float mx = -INFINITY;
  for (int64_t e = 0; e < E; ++e) mx = fmaxf(mx, l[e]);
  float sum = 0.f;
  for (int64_t e = 0; e < E; ++e) sum += expf(l[e] - mx);
  // the k largest probabilities, ties to the lower index (a larger logit is a larger probability)
  float top = 0.f;
  for (int64_t j = 0; j < k; ++j) {
    int32_t best = -1;
    float bl = -INFINITY;
    for (int64_t e = 0; e < E; ++e) {
      bool taken = false;
      for (int64_t i = 0; i < j; ++i) taken |= ids[t * per_token + i] == e;
      if (!taken && (best < 0 || l[e] > bl)) {
        best = static_cast<int32_t>(e);
        bl = l[e];
      }
    }
    ids[t * per_token + j] = best;
    const float p = expf(bl - mx) / sum;
    weights[t * per_token + j] = p;
    top += p;
  }
  for (int64_t j = 0; j < k; ++j) weights[t * per_token + j] /= top;
  for (int64_t j = k; j < per_token; ++j) ids[t * per_token + j] = static_cast<int32_t>(E);  // the shared expert
}

template <class A>
__global__ void shared_weight_kernel(DevMatrix g, const A* __restrict__ x, int64_t per_token, int64_t slot,
                                     float* weights) {
  const int64_t t = blockIdx.x;
  const int lane = threadIdx.x;
  float acc = 0.f;
  for (int64_t c = lane; c < g.cols; c += 32) acc += weight_at(g, 0, c) * to_f(x[t * g.cols + c]);
  acc = warp_sum(acc);
  if (lane == 0) weights[t * per_token + slot] = sigmoidf(acc);
}

// A warp per (slot, row of the expert's gate and up).
template <class A>
__global__ void gate_up_kernel(const DevMatrix* __restrict__ gates, const DevMatrix* __restrict__ ups,
                               const int32_t* __restrict__ ids, int64_t slots, int64_t per_token,
                               const A* __restrict__ x, int64_t H, int64_t max_inter, A* __restrict__ act) {
  const int64_t slot = blockIdx.x;
  const int64_t r = static_cast<int64_t>(blockIdx.y) * kWarps + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (slot >= slots) return;
  const int32_t e = ids[slot];
  const DevMatrix& g = gates[e];
  if (r >= g.rows) return;
  const DevMatrix& u = ups[e];
  const A* xt = x + (slot / per_token) * H;
  float a = 0.f, b = 0.f;
  for (int64_t c = lane; c < H; c += 32) {
    const float xc = to_f(xt[c]);
    a += weight_at(g, r, c) * xc;
    b += weight_at(u, r, c) * xc;
  }
  a = warp_sum(a);
  b = warp_sum(b);
  if (lane == 0) act[slot * max_inter + r] = from_f<A>(siluf(a) * b);
}

// A warp per (token, output row): the weighted sum over the token's slots.
template <class A>
__global__ void down_kernel(const DevMatrix* __restrict__ downs, const int32_t* __restrict__ ids,
                            const float* __restrict__ weights, int64_t per_token, const A* __restrict__ act,
                            int64_t max_inter, int64_t H, A* __restrict__ y) {
  const int64_t t = blockIdx.x;
  const int64_t r = static_cast<int64_t>(blockIdx.y) * kWarps + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (r >= H) return;
  float total = 0.f;
  for (int64_t j = 0; j < per_token; ++j) {
    const int64_t slot = t * per_token + j;
    const DevMatrix& d = downs[ids[slot]];
    const A* a = act + slot * max_inter;
    float acc = 0.f;
    for (int64_t c = lane; c < d.cols; c += 32) acc += weight_at(d, r, c) * to_f(a[c]);
    total += weights[slot] * warp_sum(acc);
  }
  if (lane == 0) y[t * H + r] = from_f<A>(total);
}

}  // namespace

void route_topk(const float* logits, int64_t T, int64_t E, int64_t k, int64_t per_token, int32_t* ids, float* weights,
                cudaStream_t s) {
  if (T == 0) return;
  route_kernel<<<static_cast<unsigned>((T + 63) / 64), 64, 0, s>>>(logits, T, E, k, per_token, ids, weights);
  check(cudaGetLastError(), "route_topk");
}

template <class A>
void shared_expert_weight(const DevMatrix& gate, const A* x, int64_t T, int64_t per_token, int64_t slot,
                          float* weights, cudaStream_t s) {
  if (T == 0) return;
  shared_weight_kernel<A><<<static_cast<unsigned>(T), 32, 0, s>>>(gate, x, per_token, slot, weights);
  check(cudaGetLastError(), "shared_expert_weight");
}

template <class A>
void expert_gate_up(const DevMatrix* gates, const DevMatrix* ups, const int32_t* ids, int64_t T, int64_t per_token,
                    const A* x, int64_t H, int64_t max_inter, A* act, cudaStream_t s) {
  if (T == 0) return;
  const int64_t slots = T * per_token;
  const dim3 grid(static_cast<unsigned>(slots), static_cast<unsigned>((max_inter + kWarps - 1) / kWarps));
  gate_up_kernel<A><<<grid, kWarps * 32, 0, s>>>(gates, ups, ids, slots, per_token, x, H, max_inter, act);
  check(cudaGetLastError(), "expert_gate_up");
}

template <class A>
void expert_down(const DevMatrix* downs, const int32_t* ids, const float* weights, int64_t T, int64_t per_token,
                 const A* act, int64_t max_inter, int64_t H, A* y, cudaStream_t s) {
  if (T == 0) return;
  const dim3 grid(static_cast<unsigned>(T), static_cast<unsigned>((H + kWarps - 1) / kWarps));
  down_kernel<A><<<grid, kWarps * 32, 0, s>>>(downs, ids, weights, per_token, act, max_inter, H, y);
  check(cudaGetLastError(), "expert_down");
}

#define LILY_MOE(A)                                                                                                  \
  template void shared_expert_weight<A>(const DevMatrix&, const A*, int64_t, int64_t, int64_t, float*, cudaStream_t); \
  template void expert_gate_up<A>(const DevMatrix*, const DevMatrix*, const int32_t*, int64_t, int64_t, const A*,     \
                                  int64_t, int64_t, A*, cudaStream_t);                                               \
  template void expert_down<A>(const DevMatrix*, const int32_t*, const float*, int64_t, int64_t, const A*, int64_t,   \
                               int64_t, A*, cudaStream_t);
LILY_MOE(float)
LILY_MOE(bf16)

}  // namespace lily::cuda
