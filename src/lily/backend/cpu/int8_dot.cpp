#include "lily/backend/cpu/int8_dot.h"

#include <algorithm>
#include <atomic>
#include <cmath>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

// GCC 12 reports its own AVX-512 intrinsics (the undefined pass-through
// operand of their masked forms) as maybe uninitialised.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace lily::cpu::int8 {

namespace {
std::atomic<bool> g_enabled{false};
}  // namespace

bool available() {
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl");
#else
  return false;
#endif
}

bool enable(bool on) {
  if (on && !available()) return false;
  g_enabled = on;
  return true;
}

bool enabled() { return g_enabled; }

bool supports(const Matrix& W) {
  const bool scales_ok = W.scale_dtype == DType::BF16 || W.scale_dtype == DType::F16 || W.scale_dtype == DType::F32;
  return W.quantized() && scales_ok && (W.bits == 4 || W.bits == 8) && (W.group_size == 64 || W.group_size == 128) &&
         W.cols % (2 * W.group_size) == 0;
}

namespace {
// Rounds one group: q = round-to-nearest-even(x / step), with step = max |x| / 127.
inline float group_step(const float* xg, int gs, float* sum) {
  float amax = 0.f, s = 0.f;
#pragma omp simd reduction(max : amax) reduction(+ : s)
  for (int j = 0; j < gs; ++j) {
    amax = std::max(amax, std::abs(xg[j]));
    s += xg[j];
  }
  *sum = s;
  return amax / 127.f;
}
}  // namespace

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target_clones("avx512f", "avx2", "default")))
#endif
Input quantize_input(const float* x, int64_t cols, int gs, bool split) {
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

template <int Bits, int GB>
void dot_rows_by_scale(const Matrix& W, int64_t r0, int64_t n, const Input& in, float* out, int64_t ahead) {
  switch (W.scale_dtype) {
    case DType::BF16: return dot_rows_vnni<Bits, GB, DType::BF16>(W, r0, n, in, out, ahead);
    case DType::F16: return dot_rows_vnni<Bits, GB, DType::F16>(W, r0, n, in, out, ahead);
    default: return dot_rows_vnni<Bits, GB, DType::F32>(W, r0, n, in, out, ahead);
  }
}
}  // namespace
#endif

void dot_rows(const Matrix& W, int64_t r0, int64_t n, const Input& in, float* out, int64_t ahead) {
#if defined(__x86_64__) && defined(__GNUC__)
  const int gb = W.bits * W.group_size / 8;
  if (W.bits == 4 && gb == 32) return dot_rows_by_scale<4, 32>(W, r0, n, in, out, ahead);
  if (W.bits == 4) return dot_rows_by_scale<4, 64>(W, r0, n, in, out, ahead);
  if (gb == 64) return dot_rows_by_scale<8, 64>(W, r0, n, in, out, ahead);
  return dot_rows_by_scale<8, 128>(W, r0, n, in, out, ahead);
#else
  (void)W, (void)r0, (void)in, (void)ahead;
  for (int64_t i = 0; i < n; ++i) out[i] = 0.f;  // never reached: enable() refuses without VNNI
#endif
}

}  // namespace lily::cpu::int8
