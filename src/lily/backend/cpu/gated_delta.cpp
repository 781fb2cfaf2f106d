#include "lily/backend/cpu/gated_delta.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "lily/backend/cpu/elementwise.h"
#include "lily/backend/cpu/isa_variants.h"
#include "lily/backend/cpu/thread_pool.h"

namespace lily::cpu {

namespace {
// Channels [c0, c1) of causal_conv_silu: every channel is independent, so
// ranges of them run on different threads. Vectorised across channels.
LILY_ISA_BODY void conv_channels_body(const float* x, int64_t T, int64_t C, const float* w, int64_t K, float* state, float* y,
                   int64_t c0, int64_t c1) {
  const int64_t hist = K - 1;
  // row r of [state rows ; x rows] is the input at time r - hist
  auto row = [&](int64_t r) { return r < hist ? state + r * C : x + (r - hist) * C; };
  for (int64_t t = 0; t < T; ++t) {
    float* yt = y + t * C;
    for (int64_t c = c0; c < c1; ++c) yt[c] = 0.f;
    for (int64_t j = 0; j < K; ++j) {
      const float* src = row(t + j);
#pragma omp simd
      for (int64_t c = c0; c < c1; ++c) yt[c] += w[c * K + j] * src[c];
    }
    for (int64_t c = c0; c < c1; ++c) yt[c] = silu(yt[c]);
  }
  if (hist == 0) return;
  // the newest kernel-1 rows become the state; built aside, as they may be old state rows
  std::vector<float> next(static_cast<size_t>(hist * (c1 - c0)));
  for (int64_t r = 0; r < hist; ++r) std::copy(row(T + r) + c0, row(T + r) + c1, next.begin() + r * (c1 - c0));
  for (int64_t r = 0; r < hist; ++r) std::copy(next.begin() + r * (c1 - c0), next.begin() + (r + 1) * (c1 - c0), state + r * C + c0);
}

LILY_ISA_BODY void recurrent_body(const DeltaHeadInputs& in, int64_t T, int64_t dk, int64_t dv, float* S, float* out,
                           int64_t out_stride) {
  std::vector<float> d(static_cast<size_t>(dv));
  for (int64_t t = 0; t < T; ++t) {
    const float* q = in.q + t * in.q_stride;
    const float* k = in.k + t * in.k_stride;
    const float* v = in.v + t * in.v_stride;
    const float decay = std::exp(in.g[t * in.g_stride]);
    const float beta = in.beta[t * in.beta_stride];
    // two passes over the state instead of four: decay and read it, then update and read it
    for (int64_t j = 0; j < dv; ++j) d[j] = 0.f;
    for (int64_t i = 0; i < dk; ++i) {
      float* Si = S + i * dv;
      const float ki = k[i];
#pragma omp simd
      for (int64_t j = 0; j < dv; ++j) {
        Si[j] *= decay;
        d[j] += Si[j] * ki;
      }
    }
    for (int64_t j = 0; j < dv; ++j) d[j] = (v[j] - d[j]) * beta;
    float* o = out + t * out_stride;
    for (int64_t j = 0; j < dv; ++j) o[j] = 0.f;
    for (int64_t i = 0; i < dk; ++i) {
      float* Si = S + i * dv;
      const float ki = k[i], qi = q[i];
#pragma omp simd
      for (int64_t j = 0; j < dv; ++j) {
        Si[j] += ki * d[j];
        o[j] += Si[j] * qi;
      }
    }
  }
}

// out[j] = x . KT[:, j] for j < L, KT holding a chunk's keys as columns
// ([dk, ld]): one row of a chunk's Q K^T or K K^T, summed over the key
// dimension in order, vectorised across the chunk's tokens.
LILY_ISA_BODY void row_times_keys(const float* x, const float* KT, int64_t dk, int64_t L, int64_t ld, float* out) {
  for (int64_t j = 0; j < L; ++j) out[j] = 0.f;
  for (int64_t a = 0; a < dk; ++a) {
    const float xa = x[a];
    const float* col = KT + a * ld;
#pragma omp simd
    for (int64_t j = 0; j < L; ++j) out[j] += xa * col[j];
  }
}

// C[i][c] -= (or +=) sum_a X[i][a] * B[a][c] for i < M, c < N, a < K, each
// element's terms taken in order of a, as a row-by-row loop would take them.
// R rows and W columns of C stay in registers while B's rows stream past,
// so B is read once per R rows of C instead of once per row.
template <int R, int W, bool Sub>
LILY_ISA_BODY void product_block(const float* X, int64_t ldx, const float* B, int64_t ldb, int64_t K, float* C,
                                 int64_t ldc) {
  float acc[R][W];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < W; ++c) acc[r][c] = C[r * ldc + c];
  for (int64_t a = 0; a < K; ++a) {
    const float* b = B + a * ldb;
    for (int r = 0; r < R; ++r) {
      const float x = X[r * ldx + a];
#pragma omp simd
      for (int c = 0; c < W; ++c) {
        if constexpr (Sub)
          acc[r][c] -= x * b[c];
        else
          acc[r][c] += x * b[c];
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < W; ++c) C[r * ldc + c] = acc[r][c];
}

template <bool Sub, int R>
LILY_ISA_BODY void product_rows(const float* X, int64_t ldx, const float* B, int64_t ldb, int64_t K, int64_t N, float* C,
                                int64_t ldc) {
  int64_t c = 0;
  for (; c + 64 <= N; c += 64) product_block<R, 64, Sub>(X, ldx, B + c, ldb, K, C + c, ldc);
  for (; c + 16 <= N; c += 16) product_block<R, 16, Sub>(X, ldx, B + c, ldb, K, C + c, ldc);
  for (; c < N; ++c) product_block<R, 1, Sub>(X, ldx, B + c, ldb, K, C + c, ldc);
}

template <bool Sub>
LILY_ISA_BODY void accumulate_product(const float* X, int64_t ldx, int64_t M, const float* B, int64_t ldb, int64_t K,
                                      int64_t N, float* C, int64_t ldc) {
  int64_t i = 0;
  for (; i + 4 <= M; i += 4) product_rows<Sub, 4>(X + i * ldx, ldx, B, ldb, K, N, C + i * ldc, ldc);
  for (; i < M; ++i) product_rows<Sub, 1>(X + i * ldx, ldx, B, ldb, K, N, C + i * ldc, ldc);
}

// The chunked form is a prompt's largest arithmetic after the matrix products.
LILY_ISA_BODY void chunked_body(const DeltaHeadInputs& in, int64_t T, int64_t dk, int64_t dv, int64_t chunk,
                         int64_t first_chunk, float* S, float* out, int64_t out_stride) {
  // Scratch kept per thread: a prompt calls this for every head of every
  // layer, and a few hundred kilobytes freed each time went back to the
  // system and were faulted in again by the next call.
  struct Scratch {
    std::vector<float> G, A, U, W, Vn, QS, KT, KF, dots;
  };
  thread_local Scratch sc;
  auto sized = [](std::vector<float>& v, int64_t n) -> std::vector<float>& {
    if (static_cast<int64_t>(v.size()) < n) v.resize(static_cast<size_t>(n));
    return v;
  };
  std::vector<float>& G = sized(sc.G, chunk);
  std::vector<float>& A = sized(sc.A, chunk * chunk);
  std::vector<float>& U = sized(sc.U, chunk * dv);
  std::vector<float>& W = sized(sc.W, chunk * dk);
  std::vector<float>& Vn = sized(sc.Vn, chunk * dv);
  std::vector<float>& QS = sized(sc.QS, chunk * dv);
  std::vector<float>& KT = sized(sc.KT, dk * chunk);
  std::vector<float>& KF = sized(sc.KF, dk * chunk);
  std::vector<float>& dots = sized(sc.dots, chunk);
  for (int64_t s0 = 0, L = 0; s0 < T; s0 += L) {
    L = std::min(s0 == 0 ? std::clamp<int64_t>(first_chunk, 1, chunk) : chunk, T - s0);
    auto q = [&](int64_t i) { return in.q + (s0 + i) * in.q_stride; };
    auto k = [&](int64_t i) { return in.k + (s0 + i) * in.k_stride; };
    auto v = [&](int64_t i) { return in.v + (s0 + i) * in.v_stride; };
    auto beta = [&](int64_t i) { return in.beta[(s0 + i) * in.beta_stride]; };
    float acc = 0.f;
    for (int64_t i = 0; i < L; ++i) G[i] = acc += in.g[(s0 + i) * in.g_stride];
    for (int64_t j = 0; j < L; ++j)
      for (int64_t a = 0; a < dk; ++a) KT[a * chunk + j] = k(j)[a];
    // A[i][j] = beta_i (k_i . k_j) exp(G_i - G_j), strictly lower triangle.
    for (int64_t i = 0; i < L; ++i) {
      row_times_keys(k(i), KT.data(), dk, i, chunk, dots.data());
      for (int64_t j = 0; j < i; ++j) A[i * chunk + j] = beta(i) * dots[j] * std::exp(G[i] - G[j]);
    }
    // Forward substitution of (I + A) U = beta v and (I + A) W = beta exp(G) k.
    for (int64_t i = 0; i < L; ++i) {
      float* Ui = &U[i * dv];
      float* Wi = &W[i * dk];
      const float bi = beta(i), wi = bi * std::exp(G[i]);
      for (int64_t c = 0; c < dv; ++c) Ui[c] = bi * v(i)[c];
      for (int64_t a = 0; a < dk; ++a) Wi[a] = wi * k(i)[a];
      for (int64_t j = 0; j < i; ++j) {
        const float aij = A[i * chunk + j];
#pragma omp simd
        for (int64_t c = 0; c < dv; ++c) Ui[c] -= aij * U[j * dv + c];
#pragma omp simd
        for (int64_t a = 0; a < dk; ++a) Wi[a] -= aij * W[j * dk + a];
      }
    }
    // v_new = U - W S, with S the state entering the chunk.
    std::copy(U.begin(), U.begin() + L * dv, Vn.begin());
    accumulate_product<true>(W.data(), dk, L, S, dv, dk, dv, Vn.data(), dv);
    // out_i = exp(G_i) q_i S + sum_{j<=i} (q_i . k_j) exp(G_i - G_j) v_new_j
    std::fill(QS.begin(), QS.begin() + L * dv, 0.f);
    accumulate_product<false>(q(0), in.q_stride, L, S, dv, dk, dv, QS.data(), dv);
    for (int64_t i = 0; i < L; ++i) {
      float* o = out + (s0 + i) * out_stride;
      const float* qs = &QS[i * dv];
      const float eg = std::exp(G[i]);
      for (int64_t c = 0; c < dv; ++c) o[c] = eg * qs[c];
      row_times_keys(q(i), KT.data(), dk, i + 1, chunk, dots.data());
      for (int64_t j = 0; j <= i; ++j) {
        const float f = dots[j] * std::exp(G[i] - G[j]);
#pragma omp simd
        for (int64_t c = 0; c < dv; ++c) o[c] += f * Vn[j * dv + c];
      }
    }
    // S = exp(G_last) S + sum_j exp(G_last - G_j) k_j v_new_j^T
    const float glast = G[L - 1], cd = std::exp(glast);
    for (int64_t i = 0; i < dk * dv; ++i) S[i] *= cd;
    for (int64_t j = 0; j < L; ++j) {
      const float f = std::exp(glast - G[j]);
      for (int64_t a = 0; a < dk; ++a) KF[a * chunk + j] = f * k(j)[a];
    }
    accumulate_product<false>(KF.data(), chunk, dk, Vn.data(), dv, L, dv, S, dv);
  }
}

// FMA contraction allowed at AVX2, as at AVX-512.
LILY_ISA_VARIANTS("avx2,fma,f16c", void, conv_channels,
                  (const float* x, int64_t T, int64_t C, const float* w, int64_t K, float* state, float* y, int64_t c0,
                   int64_t c1),
                  (x, T, C, w, K, state, y, c0, c1))
LILY_ISA_VARIANTS("avx2,fma,f16c", void, recurrent,
                  (const DeltaHeadInputs& in, int64_t T, int64_t dk, int64_t dv, float* S, float* out,
                   int64_t out_stride),
                  (in, T, dk, dv, S, out, out_stride))
LILY_ISA_VARIANTS("avx2,fma,f16c", void, chunked,
                  (const DeltaHeadInputs& in, int64_t T, int64_t dk, int64_t dv, int64_t chunk, int64_t first_chunk,
                   float* S, float* out, int64_t out_stride),
                  (in, T, dk, dv, chunk, first_chunk, S, out, out_stride))

void conv_range(Isa isa, const float* x, int64_t T, int64_t C, const float* w, int64_t K, float* state, float* y,
                int64_t c0, int64_t c1) {
  LILY_ISA_DISPATCH(isa, conv_channels, (x, T, C, w, K, state, y, c0, c1));
}
}  // namespace

void causal_conv_silu(const CpuContext& ctx, const float* x, int64_t T, int64_t C, const float* w, int64_t K,
                      float* state, float* y) {
  ctx.threads().parallel_for(C, 1024, [&](int64_t c0, int64_t c1) { conv_range(ctx.isa, x, T, C, w, K, state, y, c0, c1); });
}

void gated_delta_recurrent(Isa isa, const DeltaHeadInputs& in, int64_t T, int64_t dk, int64_t dv, float* S,
                           float* out, int64_t out_stride) {
  LILY_ISA_DISPATCH(isa, recurrent, (in, T, dk, dv, S, out, out_stride));
}

void gated_delta_chunked(Isa isa, const DeltaHeadInputs& in, int64_t T, int64_t dk, int64_t dv, int64_t chunk,
                         int64_t first_chunk, float* S, float* out, int64_t out_stride) {
  LILY_ISA_DISPATCH(isa, chunked, (in, T, dk, dv, chunk, first_chunk, S, out, out_stride));
}

}  // namespace lily::cpu
