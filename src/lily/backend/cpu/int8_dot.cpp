#include "lily/backend/cpu/int8_dot.h"

#include <algorithm>
#include <cmath>

#include "lily/backend/cpu/isa_variants.h"
#include "lily/backend/cpu/neon_int8.h"
#include "lily/error.h"
#include "lily/io/dtype.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

// GCC 12 reports its own AVX-512 intrinsics (the undefined pass-through
// operand of their masked forms) as maybe uninitialised.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace lily::cpu::int8 {

Kernel kernel_for(Isa isa) {
  switch (isa) {
    case Isa::Amx:
    case Isa::Avx512Vnni: return Kernel::Vnni;
    case Isa::Avx512:
    case Isa::Avx2: return Kernel::Avx2;
    case Isa::ArmDot: return Kernel::ArmDot;
    case Isa::ArmI8mm: return Kernel::ArmI8mm;
    case Isa::Portable: break;
  }
  return Kernel::None;
}

bool packed_format(const Matrix& W) {
  const bool scales_ok = W.scale_dtype == DType::BF16 || W.scale_dtype == DType::F16 || W.scale_dtype == DType::F32;
  return W.quantized() && scales_ok && (W.bits == 4 || W.bits == 8) && (W.group_size == 64 || W.group_size == 128);
}

bool supports(const Matrix& W) {
  return packed_format(W) && W.cols % (2 * W.group_size) == 0 && W.cols / W.group_size <= 256;
}

namespace {
// Rounds one group: q = round-to-nearest-even(x / step), with step = max |x| / 127.
LILY_ISA_BODY float group_step(const float* xg, int gs, float* sum) {
  float amax = 0.f, s = 0.f;
#pragma omp simd reduction(max : amax) reduction(+ : s)
  for (int j = 0; j < gs; ++j) {
    amax = std::max(amax, std::abs(xg[j]));
    s += xg[j];
  }
  *sum = s;
  return amax / 127.f;
}

LILY_ISA_BODY Input quantize_input_body(const float* x, int64_t cols, int gs, bool split) {
  const int64_t groups = cols / gs;
  Input in;
  in.q.resize(static_cast<size_t>(cols));
  in.step.resize(static_cast<size_t>(groups));
  in.sum.resize(static_cast<size_t>(groups));
  // 4-bit: input 2k goes to the even half, 2k+1 to the odd half, at the packed byte's index
  int8_t* even = in.q.data();
  int8_t* odd = in.q.data() + cols / 2;
  for (int64_t g = 0; g < groups; ++g) {
    const float* xg = x + g * gs;
    const float step = group_step(xg, gs, &in.sum[g]);
    const float inv = step > 0 ? 1.f / step : 0.f;
    in.step[g] = step;
    if (split) {
#pragma omp simd
      for (int k = 0; k < gs / 2; ++k) {
        even[g * gs / 2 + k] = static_cast<int8_t>(std::nearbyint(xg[2 * k] * inv));
        odd[g * gs / 2 + k] = static_cast<int8_t>(std::nearbyint(xg[2 * k + 1] * inv));
      }
    } else {
#pragma omp simd
      for (int j = 0; j < gs; ++j) in.q[g * gs + j] = static_cast<int8_t>(std::nearbyint(xg[j] * inv));
    }
  }
  return in;
}

LILY_ISA_VARIANTS("avx2", Input, quantize_input, (const float* x, int64_t cols, int gs, bool split), (x, cols, gs, split))
}  // namespace

Input quantize_input(Isa isa, const float* x, int64_t cols, int gs, bool split) {
  LILY_ISA_DISPATCH(isa, quantize_input, (x, cols, gs, split));
}

#if defined(__x86_64__) && defined(__GNUC__)
#define LILY_VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,f16c")))
namespace {
// Sixteen scales or biases (fewer under the mask) as floats, read where they lie.
template <DType S>
LILY_VNNI inline __m512 load16(const void* p, int64_t i, __mmask16 m) {
  if constexpr (S == DType::F32) {
    return _mm512_maskz_loadu_ps(m, static_cast<const float*>(p) + i);
  } else {
    const __m256i h = _mm256_maskz_loadu_epi16(m, static_cast<const uint16_t*>(p) + i);
    if constexpr (S == DType::F16) return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));  // BF16
  }
}

// Up to four rows against one input. Groups are taken sixteen at a time: their
// weight scales times the input steps make one vector, the bias terms
// (bias * exact input sum) another, so the loop over the packed bytes (64 a
// step) does only the byte products, one conversion and one multiply-add per
// row; a permute hands each lane its group's scale. GB is a group's packed
// bytes (32 for 4-bit groups of 64: two groups a step, lanes 0-7 and 8-15).
template <int Bits, int GB, DType S>
LILY_VNNI void dot_rows_vnni(const Matrix& W, int64_t r0, int64_t n, const Input& in, float* out, int64_t ahead) {
  // sizes from the template parameters: this runs once per few hundred bytes
  const int64_t cols = W.cols, groups = cols / W.group_size, row_bytes = cols * Bits / 8;
  constexpr int64_t sbytes = S == DType::F32 ? 4 : 2;
  const uint8_t* q[4];
  const uint8_t *sc[4], *bi[4];
  for (int64_t i = 0; i < 4; ++i) {
    const int64_t r = r0 + std::min(i, n - 1);  // a short block repeats its last row
    q[i] = static_cast<const uint8_t*>(W.data) + r * row_bytes;
    sc[i] = static_cast<const uint8_t*>(W.scales) + r * groups * sbytes;
    bi[i] = static_cast<const uint8_t*>(W.biases) + r * groups * sbytes;
  }
  const int64_t scales_ahead = ahead / row_bytes * groups * sbytes;
  const __m512i low = _mm512_set1_epi8(0x0F);
  const __m512i lane_group = GB == 32 ? _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0)
                                      : _mm512_setzero_si512();
  __m512 tot[4], bias[4], cs[4];
  for (int i = 0; i < 4; ++i) tot[i] = bias[i] = _mm512_setzero_ps();
  const int8_t* xe = in.q.data();
  const int8_t* xo = in.q.data() + cols / 2;
  for (int64_t g0 = 0; g0 < groups; g0 += 16) {
    const int64_t ng = std::min<int64_t>(16, groups - g0);
    const __mmask16 m = static_cast<__mmask16>((1u << ng) - 1);
    const __m512 step = _mm512_maskz_loadu_ps(m, in.step.data() + g0);
    const __m512 sum = _mm512_maskz_loadu_ps(m, in.sum.data() + g0);
    for (int i = 0; i < 4; ++i) {
      if (ahead) {  // the scales and biases of the rows whose bytes are prefetched: streams of their own
        _mm_prefetch(reinterpret_cast<const char*>(sc[i]) + g0 * sbytes + scales_ahead, _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(bi[i]) + g0 * sbytes + scales_ahead, _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(sc[i]) + g0 * sbytes + 5 * scales_ahead, _MM_HINT_T2);
        _mm_prefetch(reinterpret_cast<const char*>(bi[i]) + g0 * sbytes + 5 * scales_ahead, _MM_HINT_T2);
      }
      cs[i] = _mm512_mul_ps(load16<S>(sc[i], g0, m), step);
      bias[i] = _mm512_fmadd_ps(load16<S>(bi[i], g0, m), sum, bias[i]);
    }
    const int64_t begin = g0 * GB, end = (g0 + ng) * GB;
    for (int64_t at = begin; at < end; at += 64) {
      const __m512i idx = _mm512_add_epi32(_mm512_set1_epi32(static_cast<int>((at - begin) / GB)), lane_group);
      const __m512i e = _mm512_loadu_si512(xe + at);
      const __m512i o = Bits == 4 ? _mm512_loadu_si512(xo + at) : e;
      for (int i = 0; i < 4; ++i) {
        if (ahead) {  // into L2 from far ahead, so more lines are on their way than L1 can track; into L1 near
          _mm_prefetch(reinterpret_cast<const char*>(q[i]) + at + 5 * ahead, _MM_HINT_T2);
          _mm_prefetch(reinterpret_cast<const char*>(q[i]) + at + ahead, _MM_HINT_T0);
        }
        const __m512i b = _mm512_loadu_si512(q[i] + at);
        __m512i acc;
        if constexpr (Bits == 4) {
          acc = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_and_si512(b, low), e);
          acc = _mm512_dpbusd_epi32(acc, _mm512_and_si512(_mm512_srli_epi16(b, 4), low), o);
        } else {
          acc = _mm512_dpbusd_epi32(_mm512_setzero_si512(), b, e);
        }
        tot[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc), _mm512_permutexvar_ps(idx, cs[i]), tot[i]);
      }
    }
  }
  // the four rows' sums reduced together: pairs of rows interleaved and
  // added, then the four 128-bit lanes, leaving row i's total in lane i
  for (int i = 0; i < 4; ++i) tot[i] = _mm512_add_ps(tot[i], bias[i]);
  const __m512 t01 = _mm512_add_ps(_mm512_unpacklo_ps(tot[0], tot[1]), _mm512_unpackhi_ps(tot[0], tot[1]));
  const __m512 t23 = _mm512_add_ps(_mm512_unpacklo_ps(tot[2], tot[3]), _mm512_unpackhi_ps(tot[2], tot[3]));
  __m512 r = _mm512_add_ps(_mm512_shuffle_ps(t01, t23, 0x44), _mm512_shuffle_ps(t01, t23, 0xEE));
  r = _mm512_add_ps(r, _mm512_shuffle_f32x4(r, r, 0x4E));
  r = _mm512_add_ps(r, _mm512_shuffle_f32x4(r, r, 0xB1));
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, r);
  for (int64_t i = 0; i < n; ++i) out[i] = lanes[i];
}

// The same product for CPUs with AVX2 but no AVX-512 VNNI (AMD Zen 2/3,
// Intel before Ice Lake): 32 packed bytes a step. 4-bit weights meet their
// inputs through _mm256_maddubs_epi16 (two products of at most 15 x 127 a
// lane, far from its 16-bit saturation); 8-bit ones, which could saturate
// it, are widened to 16 bits first. Scales and bias terms are worked out per
// group before the loop.
#define LILY_AVX2 __attribute__((target("avx2,fma,f16c")))
template <DType S>
LILY_AVX2 inline __m256 load8(const void* p, int64_t i) {
  if constexpr (S == DType::F32) {
    return _mm256_loadu_ps(static_cast<const float*>(p) + i);
  } else {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(p) + i));
    if constexpr (S == DType::F16) return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));  // BF16
  }
}

LILY_AVX2 inline float hsum8(__m256 v) {
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 t = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(t, _mm_shuffle_ps(t, t, 1)));
}

// NT inputs (one for a decode step, two for a pair of a prompt's tokens) meet
// each 32-byte chunk of a row, unpacked once; each input keeps accumulators
// of its own updated as for it alone, so a result does not depend on how
// many share the call. A row at a time: its codes, scales and biases are
// three streams the hardware prefetcher follows (four rows side by side,
// twelve, it did not).
template <int Bits, int GB, DType S, int NT>
LILY_AVX2 void dot_rows_avx2(const Matrix& W, int64_t r0, int64_t n, const Input* in, float* out, int64_t ahead) {
  const int64_t cols = W.cols, groups = cols / W.group_size, row_bytes = cols * Bits / 8;
  constexpr int64_t sbytes = S == DType::F32 ? 4 : 2;
  constexpr int64_t kMaxGroups = 256;  // rows of up to 16384 inputs in groups of 64
  alignas(32) float cs[NT][kMaxGroups];
  const __m256i low = _mm256_set1_epi8(0x0F);
  const __m256i ones = _mm256_set1_epi16(1);
  const int64_t bytes = Bits == 4 ? cols / 2 : cols;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t r = r0 + i;
    const uint8_t* q = static_cast<const uint8_t*>(W.data) + r * row_bytes;
    const uint8_t* sc = static_cast<const uint8_t*>(W.scales) + r * groups * sbytes;
    const uint8_t* bi = static_cast<const uint8_t*>(W.biases) + r * groups * sbytes;
    float bias[NT];
    for (int t = 0; t < NT; ++t) {
      __m256 b = _mm256_setzero_ps();
      int64_t g = 0;
      for (; g + 8 <= groups; g += 8) {
        _mm256_store_ps(cs[t] + g, _mm256_mul_ps(load8<S>(sc, g), _mm256_loadu_ps(in[t].step.data() + g)));
        b = _mm256_fmadd_ps(load8<S>(bi, g), _mm256_loadu_ps(in[t].sum.data() + g), b);
      }
      float tail = 0.f;
      for (; g < groups; ++g) {
        float s1, b1;
        convert_to_float(S, sc + g * sbytes, &s1, 1);
        convert_to_float(S, bi + g * sbytes, &b1, 1);
        cs[t][g] = s1 * in[t].step[g];
        tail += b1 * in[t].sum[g];
      }
      bias[t] = hsum8(b) + tail;
    }
    __m256 tot[NT];
    for (auto& v : tot) v = _mm256_setzero_ps();
    for (int64_t at = 0; at < bytes; at += 32) {
      const int64_t g = at / GB;
      if (ahead && at % 64 == 0) {  // a line every other step: into L2 far ahead, into L1 near
        _mm_prefetch(reinterpret_cast<const char*>(q) + at + 5 * ahead, _MM_HINT_T2);
        _mm_prefetch(reinterpret_cast<const char*>(q) + at + ahead, _MM_HINT_T0);
      }
      const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + at));
      if constexpr (Bits == 4) {
        const __m256i wl = _mm256_and_si256(b, low), wh = _mm256_and_si256(_mm256_srli_epi16(b, 4), low);
        for (int t = 0; t < NT; ++t) {
          const __m256i e = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in[t].q.data() + at));
          const __m256i o = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in[t].q.data() + cols / 2 + at));
          const __m256i lo = _mm256_maddubs_epi16(wl, e);
          const __m256i hi = _mm256_maddubs_epi16(wh, o);
          const __m256i s32 = _mm256_madd_epi16(_mm256_add_epi16(lo, hi), ones);
          tot[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s32), _mm256_broadcast_ss(cs[t] + g), tot[t]);
        }
      } else {
        const __m256i w0 = _mm256_cvtepu8_epi16(_mm256_castsi256_si128(b));
        const __m256i w1 = _mm256_cvtepu8_epi16(_mm256_extracti128_si256(b, 1));
        for (int t = 0; t < NT; ++t) {
          const __m256i e = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in[t].q.data() + at));
          const __m256i x0 = _mm256_cvtepi8_epi16(_mm256_castsi256_si128(e));
          const __m256i x1 = _mm256_cvtepi8_epi16(_mm256_extracti128_si256(e, 1));
          const __m256i s32 = _mm256_add_epi32(_mm256_madd_epi16(w0, x0), _mm256_madd_epi16(w1, x1));
          tot[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s32), _mm256_broadcast_ss(cs[t] + g), tot[t]);
        }
      }
    }
    for (int t = 0; t < NT; ++t) out[t * 4 + i] = hsum8(tot[t]) + bias[t];
  }
}

template <int Bits, int GB, int NT>
void dot_rows_by_scale(Kernel k, const Matrix& W, int64_t r0, int64_t n, const Input* in, float* out, int64_t ahead) {
  if (k == Kernel::Vnni) {  // one input at a time: prompts take the VNNI tiles (int8_tile)
    for (int t = 0; t < NT; ++t) {
      switch (W.scale_dtype) {
        case DType::BF16: dot_rows_vnni<Bits, GB, DType::BF16>(W, r0, n, in[t], out + 4 * t, ahead); break;
        case DType::F16: dot_rows_vnni<Bits, GB, DType::F16>(W, r0, n, in[t], out + 4 * t, ahead); break;
        default: dot_rows_vnni<Bits, GB, DType::F32>(W, r0, n, in[t], out + 4 * t, ahead); break;
      }
    }
    return;
  }
  switch (W.scale_dtype) {
    case DType::BF16: return dot_rows_avx2<Bits, GB, DType::BF16, NT>(W, r0, n, in, out, ahead);
    case DType::F16: return dot_rows_avx2<Bits, GB, DType::F16, NT>(W, r0, n, in, out, ahead);
    default: return dot_rows_avx2<Bits, GB, DType::F32, NT>(W, r0, n, in, out, ahead);
  }
}

template <int NT>
void dot_rows_n(Kernel k, const Matrix& W, int64_t r0, int64_t n, const Input* in, float* out, int64_t ahead) {
  const int gb = W.bits * W.group_size / 8;
  if (W.bits == 4 && gb == 32) return dot_rows_by_scale<4, 32, NT>(k, W, r0, n, in, out, ahead);
  if (W.bits == 4) return dot_rows_by_scale<4, 64, NT>(k, W, r0, n, in, out, ahead);
  if (gb == 64) return dot_rows_by_scale<8, 64, NT>(k, W, r0, n, in, out, ahead);
  return dot_rows_by_scale<8, 128, NT>(k, W, r0, n, in, out, ahead);
}
}  // namespace
#endif

void dot_rows(Kernel k, const Matrix& W, int64_t r0, int64_t n, const Input& in, float* out, int64_t ahead) {
  if (k == Kernel::None) throw Error("int8 dot_rows: no int8 kernel in this context");
#if defined(__x86_64__) && defined(__GNUC__)
  dot_rows_n<1>(k, W, r0, n, &in, out, ahead);
#elif LILY_NEON_INT8
  (void)k, (void)ahead;
  neon::dot_rows(W, r0, n, &in, 1, out);
#else
  (void)W, (void)r0, (void)in, (void)ahead, (void)n, (void)out;
  throw Error("int8 dot_rows: no int8 kernel in this build");
#endif
}

void dot_tile(Kernel k, const Matrix& W, int64_t r0, int64_t n, const Input* in, int64_t nt, float* out, int64_t ahead) {
  if (k == Kernel::None) throw Error("int8 dot_tile: no int8 kernel in this context");
#if defined(__x86_64__) && defined(__GNUC__)
  int64_t t = 0;
  for (; t + 2 <= nt; t += 2) dot_rows_n<2>(k, W, r0, n, in + t, out + 4 * t, t == 0 ? ahead : 0);
  for (; t < nt; ++t) dot_rows_n<1>(k, W, r0, n, in + t, out + 4 * t, t == 0 ? ahead : 0);
#elif LILY_NEON_INT8
  (void)k, (void)ahead;
  neon::dot_rows(W, r0, n, in, nt, out);
#else
  (void)W, (void)r0, (void)in, (void)ahead, (void)n, (void)out, (void)nt;
  throw Error("int8 dot_tile: no int8 kernel in this build");
#endif
}

}  // namespace lily::cpu::int8
