#include "lily/backend/cpu/kernels.h"

#include <cmath>
#include <cstdlib>
#include <cstring>

#include "lily/backend/cpu/isa_variants.h"
#include "lily/quant/affine.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

// GCC 12 reports its own AVX-512 intrinsics (the undefined pass-through
// operand of their masked forms) as maybe uninitialised.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace lily::cpu::kernels {

namespace {

// The float dot of unquantized rows (decode, attention) sums in double: these
// paths are the fp32 reference, and with a float sum their result moved with
// the vector width (16 lanes against 8) by more than transformers' own error
// on long prompts. Decode is bound by memory, so the wider sum costs nothing.
LILY_ISA_BODY float dot_body(const float* a, const float* b, int64_t n) {
  double s = 0.;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < n; ++i) s += double(a[i]) * b[i];
  return float(s);
}

LILY_ISA_BODY void axpy_body(float a, const float* x, float* y, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}

LILY_ISA_BODY void bf16_to_f32_body(const uint16_t* src, float* dst, int64_t n) {
  auto* out = reinterpret_cast<uint32_t*>(dst);
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<uint32_t>(src[i]) << 16;
}

LILY_ISA_BODY void group_sums_body(const float* x, int64_t n, int gs, float* xsum) {
  for (int64_t g = 0; g < n / gs; ++g) {
    float s = 0.f;
#pragma omp simd reduction(+ : s)
    for (int j = 0; j < gs; ++j) s += x[g * gs + j];
    xsum[g] = s;
  }
}

// xe[j] = x[2j], xo[j] = x[2j+1]: the inputs met by low and high nibbles.
LILY_ISA_BODY void deinterleave_body(const float* x, int64_t n, float* xe, float* xo) {
#pragma omp simd
  for (int64_t j = 0; j < n / 2; ++j) {
    xe[j] = x[2 * j];
    xo[j] = x[2 * j + 1];
  }
}

// Prompts dequantize every row they use, so the common widths get byte loops
// the compiler vectorises; the others are read value by value.
LILY_ISA_BODY void dequantize_row_body(const uint8_t* packed, const float* scales, const float* biases, int64_t cols,
                                       int bits, int gs, float* out) {
  for (int64_t g = 0; g < cols / gs; ++g) {
    const float s = scales[g], b = biases[g];
    float* o = out + g * gs;
    if (bits == 4) {
      const uint8_t* p = packed + g * gs / 2;
#pragma omp simd
      for (int j = 0; j < gs / 2; ++j) {
        o[2 * j] = s * static_cast<float>(p[j] & 15) + b;
        o[2 * j + 1] = s * static_cast<float>(p[j] >> 4) + b;
      }
    } else if (bits == 8) {
      const uint8_t* p = packed + g * gs;
#pragma omp simd
      for (int j = 0; j < gs; ++j) o[j] = s * static_cast<float>(p[j]) + b;
    } else {
      for (int64_t c = 0; c < gs; ++c) o[c] = s * static_cast<float>(quant::unpack(packed, g * gs + c, bits)) + b;
    }
  }
}

LILY_ISA_VARIANTS("avx2", float, dot, (const float* a, const float* b, int64_t n), (a, b, n))
LILY_ISA_VARIANTS("avx2", void, axpy, (float a, const float* x, float* y, int64_t n), (a, x, y, n))
LILY_ISA_VARIANTS("avx2", void, bf16_to_f32, (const uint16_t* src, float* dst, int64_t n), (src, dst, n))
LILY_ISA_VARIANTS("avx2", void, group_sums, (const float* x, int64_t n, int gs, float* xsum), (x, n, gs, xsum))
LILY_ISA_VARIANTS("avx2", void, deinterleave, (const float* x, int64_t n, float* xe, float* xo), (x, n, xe, xo))
LILY_ISA_VARIANTS("avx2", void, dequantize_row,
                  (const uint8_t* packed, const float* scales, const float* biases, int64_t cols, int bits, int gs,
                   float* out),
                  (packed, scales, biases, cols, bits, gs, out))
}  // namespace

float dot(Isa isa, const float* a, const float* b, int64_t n) { LILY_ISA_DISPATCH(isa, dot, (a, b, n)); }
void axpy(Isa isa, float a, const float* x, float* y, int64_t n) { LILY_ISA_DISPATCH(isa, axpy, (a, x, y, n)); }
void bf16_to_f32(Isa isa, const uint16_t* src, float* dst, int64_t n) {
  LILY_ISA_DISPATCH(isa, bf16_to_f32, (src, dst, n));
}
void group_sums(Isa isa, const float* x, int64_t n, int gs, float* xsum) {
  LILY_ISA_DISPATCH(isa, group_sums, (x, n, gs, xsum));
}
void deinterleave(Isa isa, const float* x, int64_t n, float* xe, float* xo) {
  LILY_ISA_DISPATCH(isa, deinterleave, (x, n, xe, xo));
}
void dequantize_row(Isa isa, const uint8_t* packed, const float* scales, const float* biases, int64_t cols, int bits,
                    int gs, float* out) {
  LILY_ISA_DISPATCH(isa, dequantize_row, (packed, scales, biases, cols, bits, gs, out));
}

// Each group's products are summed lane-wise into a 16-wide partial vector,
// which is scaled into the row total: one horizontal sum per row, not per group.
static float dot_q4_portable(const uint8_t* q, const float* xe, const float* xo, const float* xsum,
                              const float* scales, const float* biases, int64_t groups, int gs) {
  float tot[16] = {0};
  float bias_sum = 0.f;
  const int half = gs / 2;
  for (int64_t g = 0; g < groups; ++g) {
    const uint8_t* qg = q + g * half;
    const float* eg = xe + g * half;
    const float* og = xo + g * half;
    float p[16] = {0};
    for (int j0 = 0; j0 < half; j0 += 16)
#pragma omp simd
      for (int k = 0; k < 16; ++k) {
        const uint8_t b = qg[j0 + k];
        p[k] += static_cast<float>(b & 15) * eg[j0 + k] + static_cast<float>(b >> 4) * og[j0 + k];
      }
    const float s = scales[g];
#pragma omp simd
    for (int k = 0; k < 16; ++k) tot[k] += s * p[k];
    bias_sum += biases[g] * xsum[g];
  }
  float r = bias_sum;
  for (int k = 0; k < 16; ++k) r += tot[k];
  return r;
}

static float dot_q8_portable(const uint8_t* q, const float* x, const float* xsum, const float* scales,
                              const float* biases, int64_t groups, int gs) {
  float tot[16] = {0};
  float bias_sum = 0.f;
  for (int64_t g = 0; g < groups; ++g) {
    const uint8_t* qg = q + g * gs;
    const float* xg = x + g * gs;
    float p[16] = {0};
    for (int j0 = 0; j0 < gs; j0 += 16)
#pragma omp simd
      for (int k = 0; k < 16; ++k) p[k] += static_cast<float>(qg[j0 + k]) * xg[j0 + k];
    const float s = scales[g];
#pragma omp simd
    for (int k = 0; k < 16; ++k) tot[k] += s * p[k];
    bias_sum += biases[g] * xsum[g];
  }
  float r = bias_sum;
  for (int k = 0; k < 16; ++k) r += tot[k];
  return r;
}

#if defined(__x86_64__) && defined(__GNUC__)
// Hand-written AVX-512 and AVX2 versions over a tile of R rows and T tokens:
// each loaded weight is converted to float once and met by every token, each
// token's input is loaded once for the R rows, and the R x T independent
// accumulators keep the multiply-add units busy. Bytes are widened to lanes,
// nibbles split by mask and shift. The arithmetic of one (row, token) is the
// same in every tile shape, so a batched decode step equals a lone one (the
// scalar bias sum is an explicit fma: left to the compiler, it would be
// contracted in some shapes and not in others).
template <int Bits, int R, int T>
__attribute__((target("avx512f,avx512bw"))) static void q_tile_avx512(const QuantRows& w, int r0, const QuantInputs& in,
                                                                      int t0, float* out, int64_t out_stride) {
  const int bytes = Bits == 4 ? w.gs / 2 : w.gs;  // packed bytes per group
  const __m512i mask = _mm512_set1_epi32(15);
  __m512 tot[R][T];
  float bias_sum[R][T] = {};
  for (auto& row : tot)
    for (auto& v : row) v = _mm512_setzero_ps();
  for (int64_t g = 0; g < w.groups; ++g) {
    const int64_t off = g * bytes;
    // 4-bit: pe meets the low nibbles and even inputs, po the high nibbles and odd inputs; 8-bit: pe only
    __m512 pe[R][T], po[R][T];
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < T; ++t) pe[r][t] = po[r][t] = _mm512_setzero_ps();
    for (int j = 0; j < bytes; j += 16) {
      __m512 lo[R], hi[R];
      for (int r = 0; r < R; ++r) {
        const __m512i b =
            _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w.q[r0 + r] + off + j)));
        if constexpr (Bits == 4) {
          lo[r] = _mm512_cvtepi32_ps(_mm512_and_si512(b, mask));
          hi[r] = _mm512_cvtepi32_ps(_mm512_srli_epi32(b, 4));
        } else {
          lo[r] = _mm512_cvtepi32_ps(b);
        }
      }
      for (int t = 0; t < T; ++t) {
        const int64_t at = (t0 + t) * in.x_stride + off + j;
        if constexpr (Bits == 4) {
          const __m512 e = _mm512_loadu_ps(in.xe + at), o = _mm512_loadu_ps(in.xo + at);
          for (int r = 0; r < R; ++r) {
            pe[r][t] = _mm512_fmadd_ps(lo[r], e, pe[r][t]);
            po[r][t] = _mm512_fmadd_ps(hi[r], o, po[r][t]);
          }
        } else {
          const __m512 xv = _mm512_loadu_ps(in.x + at);
          for (int r = 0; r < R; ++r) pe[r][t] = _mm512_fmadd_ps(lo[r], xv, pe[r][t]);
        }
      }
    }
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < T; ++t) {
        const __m512 p = Bits == 4 ? _mm512_add_ps(pe[r][t], po[r][t]) : pe[r][t];
        tot[r][t] = _mm512_fmadd_ps(_mm512_set1_ps(w.scales[r0 + r][g]), p, tot[r][t]);
        bias_sum[r][t] = std::fma(w.biases[r0 + r][g], in.xsum[(t0 + t) * in.xsum_stride + g], bias_sum[r][t]);
      }
  }
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) out[(t0 + t) * out_stride + r0 + r] = _mm512_reduce_add_ps(tot[r][t]) + bias_sum[r][t];
}

__attribute__((target("avx2,fma"))) static float hsum256(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
  return _mm_cvtss_f32(s);
}

template <int Bits, int R, int T>
__attribute__((target("avx2,fma"))) static void q_tile_avx2(const QuantRows& w, int r0, const QuantInputs& in, int t0,
                                                            float* out, int64_t out_stride) {
  const int bytes = Bits == 4 ? w.gs / 2 : w.gs;
  const __m256i mask = _mm256_set1_epi32(15);
  __m256 tot[R][T];
  float bias_sum[R][T] = {};
  for (auto& row : tot)
    for (auto& v : row) v = _mm256_setzero_ps();
  for (int64_t g = 0; g < w.groups; ++g) {
    const int64_t off = g * bytes;
    __m256 p[R][T];
    for (auto& row : p)
      for (auto& v : row) v = _mm256_setzero_ps();
    for (int j = 0; j < bytes; j += 8) {
      for (int r = 0; r < R; ++r) {
        const __m256i b =
            _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(w.q[r0 + r] + off + j)));
        for (int t = 0; t < T; ++t) {
          const int64_t at = (t0 + t) * in.x_stride + off + j;
          if constexpr (Bits == 4) {
            p[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_and_si256(b, mask)), _mm256_loadu_ps(in.xe + at), p[r][t]);
            p[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(b, 4)), _mm256_loadu_ps(in.xo + at), p[r][t]);
          } else {
            p[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(b), _mm256_loadu_ps(in.x + at), p[r][t]);
          }
        }
      }
    }
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < T; ++t) {
        tot[r][t] = _mm256_fmadd_ps(_mm256_set1_ps(w.scales[r0 + r][g]), p[r][t], tot[r][t]);
        bias_sum[r][t] = std::fma(w.biases[r0 + r][g], in.xsum[(t0 + t) * in.xsum_stride + g], bias_sum[r][t]);
      }
  }
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) out[(t0 + t) * out_stride + r0 + r] = hsum256(tot[r][t]) + bias_sum[r][t];
}

__attribute__((target("avx512f"))) static void dot4x4_avx512(const float* const w[4], const float* const x[4],
                                                              int64_t n, float out[4][4]) {
  __m512 acc[4][4];
  for (auto& r : acc)
    for (auto& a : r) a = _mm512_setzero_ps();
  int64_t c = 0;
  for (; c + 16 <= n; c += 16) {
    const __m512 x0 = _mm512_loadu_ps(x[0] + c), x1 = _mm512_loadu_ps(x[1] + c);
    const __m512 x2 = _mm512_loadu_ps(x[2] + c), x3 = _mm512_loadu_ps(x[3] + c);
    for (int i = 0; i < 4; ++i) {
      const __m512 wv = _mm512_loadu_ps(w[i] + c);
      acc[i][0] = _mm512_fmadd_ps(wv, x0, acc[i][0]);
      acc[i][1] = _mm512_fmadd_ps(wv, x1, acc[i][1]);
      acc[i][2] = _mm512_fmadd_ps(wv, x2, acc[i][2]);
      acc[i][3] = _mm512_fmadd_ps(wv, x3, acc[i][3]);
    }
  }
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) {
      float s = _mm512_reduce_add_ps(acc[i][j]);
      for (int64_t k = c; k < n; ++k) s += w[i][k] * x[j][k];
      out[i][j] = s;
    }
}

// AVX2 has 16 vector registers: the tile is done as two 4 x 2 halves.
__attribute__((target("avx2,fma"))) static void dot4x4_avx2(const float* const w[4], const float* const x[4],
                                                             int64_t n, float out[4][4]) {
  for (int jh = 0; jh < 4; jh += 2) {
    __m256 acc[4][2];
    for (auto& r : acc) r[0] = r[1] = _mm256_setzero_ps();
    int64_t c = 0;
    for (; c + 8 <= n; c += 8) {
      const __m256 x0 = _mm256_loadu_ps(x[jh] + c), x1 = _mm256_loadu_ps(x[jh + 1] + c);
      for (int i = 0; i < 4; ++i) {
        const __m256 wv = _mm256_loadu_ps(w[i] + c);
        acc[i][0] = _mm256_fmadd_ps(wv, x0, acc[i][0]);
        acc[i][1] = _mm256_fmadd_ps(wv, x1, acc[i][1]);
      }
    }
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 2; ++j) {
        float s = hsum256(acc[i][j]);
        for (int64_t k = c; k < n; ++k) s += w[i][k] * x[jh + j][k];
        out[i][jh + j] = s;
      }
  }
}

#endif

void dot_q_rows(Isa isa, const QuantRows& w, const QuantInputs& in, int64_t T, float* out, int64_t out_stride) {
  int64_t t = 0;
  (void)isa;  // only the x86 build has wider kernels than the portable one
#if defined(__x86_64__) && defined(__GNUC__)
  // tokens four at a time (rows two by two: the registers hold 2 x 4 tiles), the rest one by one
  if (isa >= Isa::Avx512) {
    auto tile4 = w.bits == 4 ? q_tile_avx512<4, 2, 4> : q_tile_avx512<8, 2, 4>;
    auto tile1 = w.bits == 4 ? q_tile_avx512<4, 4, 1> : q_tile_avx512<8, 4, 1>;
    for (; t + 4 <= T; t += 4) tile4(w, 0, in, t, out, out_stride), tile4(w, 2, in, t, out, out_stride);
    for (; t < T; ++t) tile1(w, 0, in, t, out, out_stride);
    return;
  }
  if (isa >= Isa::Avx2) {
    auto tile4 = w.bits == 4 ? q_tile_avx2<4, 1, 4> : q_tile_avx2<8, 1, 4>;
    auto tile1 = w.bits == 4 ? q_tile_avx2<4, 4, 1> : q_tile_avx2<8, 4, 1>;
    for (; t + 4 <= T; t += 4)
      for (int r = 0; r < 4; ++r) tile4(w, r, in, t, out, out_stride);
    for (; t < T; ++t) tile1(w, 0, in, t, out, out_stride);
    return;
  }
#endif
  for (; t < T; ++t)
    for (int r = 0; r < 4; ++r)
      out[t * out_stride + r] =
          w.bits == 4 ? dot_q4_portable(w.q[r], in.xe + t * in.x_stride, in.xo + t * in.x_stride,
                                        in.xsum + t * in.xsum_stride, w.scales[r], w.biases[r], w.groups, w.gs)
                      : dot_q8_portable(w.q[r], in.x + t * in.x_stride, in.xsum + t * in.xsum_stride, w.scales[r],
                                        w.biases[r], w.groups, w.gs);
}

void dot4x4(Isa isa, const float* const w[4], const float* const x[4], int64_t n, float out[4][4]) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (isa >= Isa::Avx512) {
    dot4x4_avx512(w, x, n, out);
    return;
  }
  if (isa >= Isa::Avx2) {
    dot4x4_avx2(w, x, n, out);
    return;
  }
#endif
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) out[i][j] = dot(isa, w[i], x[j], n);
}

}  // namespace lily::cpu::kernels
