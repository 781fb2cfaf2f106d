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
constexpr int64_t kMaxGroups = 256;  // a row of up to 16384 inputs in groups of 64
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
  return W.quantized() && (W.bits == 4 || W.bits == 8) && (W.group_size == 64 || W.group_size == 128) &&
         W.cols % (2 * W.group_size) == 0 && W.cols / W.group_size <= kMaxGroups;
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
// 64 packed bytes per step: for 4-bit and groups of 64 that is two groups
// (lanes 0-7 and 8-15 of the int32 sums), otherwise one group or half of one.
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni"))) static void dot_rows_vnni(const kernels::QuantRows& w,
                                                                                           const Input& in, float out[4]) {
  const int64_t groups = w.groups, cols = groups * w.gs;
  const int gs = w.gs, bits = w.bits;
  const auto& q = w.q;
  const auto& sc = w.scales;
  const auto& bi = w.biases;
  const __m512i low = _mm512_set1_epi8(0x0F);
  __m512 tot[4];
  float bias_sum[4] = {0, 0, 0, 0};
  for (auto& t : tot) t = _mm512_setzero_ps();
  const int64_t bytes = bits == 4 ? cols / 2 : cols;
  const int64_t group_bytes = bits == 4 ? gs / 2 : gs;
  const int8_t* xe = in.q.data();
  const int8_t* xo = in.q.data() + cols / 2;
  // each group's weight scale times its input step, once per call rather than in the loop
  float cs[4][kMaxGroups];
  for (int r = 0; r < 4; ++r)
#pragma omp simd
    for (int64_t g = 0; g < groups; ++g) cs[r][g] = sc[r][g] * in.step[g];
  const __m512i pair = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
  for (int64_t at = 0; at < bytes; at += 64) {
    const __m512i e = _mm512_loadu_si512(xe + at);
    const __m512i o = bits == 4 ? _mm512_loadu_si512(xo + at) : e;
    const int64_t g0 = at / group_bytes;
    for (int r = 0; r < 4; ++r) {
      const __m512i b = _mm512_loadu_si512(q[r] + at);
      __m512i acc;
      if (bits == 4) {
        acc = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_and_si512(b, low), e);
        acc = _mm512_dpbusd_epi32(acc, _mm512_and_si512(_mm512_srli_epi16(b, 4), low), o);
      } else {
        acc = _mm512_dpbusd_epi32(_mm512_setzero_si512(), b, e);
      }
      const __m512 scale = group_bytes == 32  // two groups in the register: lanes 0-7 and 8-15
                               ? _mm512_permutexvar_ps(pair, _mm512_maskz_loadu_ps(0x3, cs[r] + g0))
                               : _mm512_set1_ps(cs[r][g0]);
      tot[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc), scale, tot[r]);
    }
  }
  for (int r = 0; r < 4; ++r) {
    for (int64_t g = 0; g < groups; ++g) bias_sum[r] = std::fma(bi[r][g], in.sum[g], bias_sum[r]);
    out[r] = _mm512_reduce_add_ps(tot[r]) + bias_sum[r];
  }
}
#endif

void dot_rows(const kernels::QuantRows& w, const Input& in, float out[4]) {
#if defined(__x86_64__) && defined(__GNUC__)
  dot_rows_vnni(w, in, out);
#else
  (void)w, (void)in;
  for (int r = 0; r < 4; ++r) out[r] = 0.f;  // never reached: enable() refuses without VNNI
#endif
}

}  // namespace lily::cpu::int8
