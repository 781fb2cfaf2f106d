#include "lily/backend/cpu/ggml_int8_dot.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "lily/error.h"
#include "lily/io/gguf.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace lily::cpu::ggml_int8 {

bool supports(const Matrix& W) {
  if (!W.ggml_blocks()) return false;
  switch (static_cast<GgmlType>(W.ggml_type)) {
    case GgmlType::Q8_0:
    case GgmlType::Q4_0: return W.cols % 32 == 0;
    case GgmlType::Q2_K:
    case GgmlType::Q3_K:
    case GgmlType::Q4_K:
    case GgmlType::Q5_K:
    case GgmlType::Q6_K:
    case GgmlType::IQ4_XS: return W.cols % 256 == 0;
    default: return false;
  }
}

bool has_kernel(int8::Kernel k) { return k == int8::Kernel::Vnni || k == int8::Kernel::Avx2; }

namespace {
// How many inputs share a step for a format: 256 for the super-block formats
// (llama.cpp's Q8_K), 32 for Q4_0 and Q8_0 (their blocks).
int rounding_group(GgmlType type) { return type == GgmlType::Q4_0 || type == GgmlType::Q8_0 ? 32 : 256; }
}  // namespace

Input quantize_input(Isa isa, GgmlType type, const float* x, int64_t cols) {
  Input in;
  const int group = rounding_group(type);
  if (cols % group != 0) throw Error("ggml int8 input: " + std::to_string(cols) + " columns are not whole groups of " +
                                     std::to_string(group));
  in.rounded = int8::quantize_input(isa, x, cols, group, false);
  const int8_t* q = in.rounded.q.data();
  in.sum4.resize(static_cast<size_t>(cols / 4));
  in.sum4_x32.resize(in.sum4.size());
  for (int64_t i = 0; i < cols / 4; ++i) {
    in.sum4[i] = q[4 * i] + q[4 * i + 1] + q[4 * i + 2] + q[4 * i + 3];
    in.sum4_x32[i] = -32 * in.sum4[i];
  }
  in.sum16.resize(static_cast<size_t>(cols / 16));
  in.codes16.resize(in.sum16.size());
  for (int64_t k = 0; k < cols / 16; ++k) {  // exact, as the group sums are: Q2_K's mins meet them
    float acc = 0;
    for (int64_t c = 16 * k; c < 16 * k + 16; ++c) acc += x[c];
    in.sum16[static_cast<size_t>(k)] = acc;
    in.codes16[static_cast<size_t>(k)] =
        static_cast<int16_t>(in.sum4[4 * k] + in.sum4[4 * k + 1] + in.sum4[4 * k + 2] + in.sum4[4 * k + 3]);
  }
  if (group != kGroup) {  // the step of each 32 inputs, and their exact sum, as the kernels read them
    const int64_t per = group / kGroup;
    std::vector<float> step(static_cast<size_t>(cols / kGroup)), sum(step.size());
    for (int64_t g = 0; g < cols / kGroup; ++g) {
      step[g] = in.rounded.step[g / per];
      sum[g] = in.sum16[2 * g] + in.sum16[2 * g + 1];
    }
    in.rounded.step = std::move(step);
    in.rounded.sum = std::move(sum);
  }
  if (cols % 256 == 0) {
    in.steps_sums.resize(static_cast<size_t>(cols / 16));
    in.steps_twice.resize(static_cast<size_t>(cols / 16));
    for (int64_t s = 0; s < cols / 256; ++s)
      for (int64_t g = 0; g < 8; ++g) {
        in.steps_sums[16 * s + g] = in.rounded.step[8 * s + g];
        in.steps_sums[16 * s + 8 + g] = in.rounded.sum[8 * s + g];
        in.steps_twice[16 * s + 2 * g] = in.steps_twice[16 * s + 2 * g + 1] = in.rounded.step[8 * s + g];
      }
  }
  return in;
}

#if defined(__x86_64__) && defined(__GNUC__)
// GCC 12 reports its own AVX-512 intrinsics (the undefined pass-through
// operand of their masked forms) as maybe uninitialised.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
// AVX-512 VNNI on 256-bit vectors: one instruction for 32 products.
#define GK_NS vnni
#define GK_TARGET "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni"
#define GK_DOT(acc, u8, s8) _mm256_dpbusd_epi32((acc), (u8), (s8))
#include "lily/backend/cpu/ggml_int8_kernels.inc"
#undef GK_NS
#undef GK_TARGET
#undef GK_DOT

// The K formats again on 512-bit vectors, where AVX-512 VNNI is: 64 codes a
// step (a whole pair of sub-blocks), the scales of a super-block decoded
// with vector shuffles and turned into one vector of per-lane factors.
namespace vnni512 {
#define LILY_VNNI512 [[gnu::target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]]
using vnni::half_at;
using vnni::prefetch;

// 32 bytes into both halves of a vector, the upper half shifted right by `s` bits.
LILY_VNNI512 inline __m512i both_halves(const uint8_t* p, int s) {
  const __m512i v = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  return _mm512_mask_srli_epi16(v, static_cast<__mmask32>(0xFFFF0000u), v, static_cast<unsigned>(s));
}

// Q4_K and Q5_K (see q45_k of the 256-bit kernels for the format). The twelve
// scale bytes, as 32-bit words a, b, c, become [a & 0x3f.., (c & 0x0f..) |
// ((a >> 2) & 0x30..), b & 0x3f.., ((c >> 4) & 0x0f..) | ((b >> 2) & 0x30..)]:
// the eight scales then the eight mins, one byte each. NT inputs meet each
// decoded block (a prompt's tokens; one for decode), each with accumulators
// of its own (tot[i * NT + t]) and the same operations in the same order,
// so a token's result does not depend on how many share the call.
template <bool Five, int NT>
LILY_VNNI512 [[gnu::always_inline]] inline void q45_k(const uint8_t* const* row, int64_t blocks, const Input* in,
                                                      __m512* tot, __m512* mins, int64_t ahead) {
  constexpr int64_t kBytes = Five ? 176 : 144;
  const __m512i low = _mm512_set1_epi8(0x0F), bit4 = _mm512_set1_epi8(0x10);
  const __m128i shift = _mm_setr_epi32(0, 0, 0, 4);
  const __m128i keep = _mm_setr_epi32(0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f);
  const __m128i tops = _mm_setr_epi32(0, 0x30303030, 0, 0x30303030);
  const __m512i halves = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
  for (int64_t s = 0; s < blocks; ++s) {
    const int8_t* xs[NT];
    __m512 steps_sums[NT];
    for (int t = 0; t < NT; ++t) {
      xs[t] = in[t].rounded.q.data() + 256 * s;
      steps_sums[t] = _mm512_loadu_ps(in[t].steps_sums.data() + 16 * s);
    }
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) {
      const uint8_t* blk = row[i] + kBytes * s;
      if (ahead) prefetch(blk, kBytes, ahead);
      const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 4));
      const __m128i v1 = _mm_shuffle_epi32(raw, _MM_SHUFFLE(2, 1, 2, 0));  // a c b c
      const __m128i v2 = _mm_shuffle_epi32(raw, _MM_SHUFFLE(1, 1, 0, 0));  // a a b b
      const __m128i sm = _mm_or_si128(_mm_and_si128(_mm_srlv_epi32(v1, shift), keep),
                                      _mm_and_si128(_mm_srli_epi32(v2, 2), tops));
      const __m512 scale_min = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(sm));
      int32_t dm;
      std::memcpy(&dm, blk, 4);
      const __m512 d_dmin = _mm512_permutexvar_ps(halves, _mm512_castps128_ps512(_mm_cvtph_ps(_mm_cvtsi32_si128(dm))));
      const __m512 sd = _mm512_mul_ps(scale_min, d_dmin);
      // lanes 0-7: d x scale x input step; 8-15: dmin x min x input sum
      __m512 f[NT];
      for (int t = 0; t < NT; ++t) {
        f[t] = _mm512_mul_ps(sd, steps_sums[t]);
        mins[i * NT + t] = _mm512_add_ps(mins[i * NT + t], f[t]);
      }
      const uint8_t* qs = blk + (Five ? 48 : 16);
      const __m512i hb = Five ? both_halves(blk + 16, 1) : _mm512_setzero_si512();
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) {  // 64 inputs: sub-blocks 2j (low nibbles) and 2j + 1 (high)
        __m512i w = _mm512_and_si512(both_halves(qs + 32 * j, 4), low);
        if constexpr (Five) {  // bit 2j of qh (bit 2j + 1 in the upper half, shifted down one) to bit 4
          const int b = 2 * j;
          const __m512i h = b < 4 ? _mm512_slli_epi16(hb, static_cast<unsigned>(4 - b))
                                  : _mm512_srli_epi16(hb, static_cast<unsigned>(b - 4));
          w = _mm512_or_si512(w, _mm512_and_si512(h, bit4));
        }
        const __m512i pick = _mm512_add_epi32(halves, _mm512_set1_epi32(2 * j));
        for (int t = 0; t < NT; ++t) {
          const __m512i acc = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w, _mm512_loadu_si512(xs[t] + 64 * j));
          tot[i * NT + t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc), _mm512_permutexvar_ps(pick, f[t]), tot[i * NT + t]);
        }
      }
    }
  }
}

// Q6_K (see q6_k of the 256-bit kernels): a half of 128 is 64 bytes of low
// nibbles and 32 of high bit pairs, two steps of 64 codes; the accumulators
// start at -32 x the inputs' sums, which takes the offset off. NT inputs as
// for q45_k. Not forced inline: inlined into dot_tile_k beside the Q4_K and
// Q5_K kernels, its decode form ran at half the bandwidth.
template <int NT>
LILY_VNNI512 void q6_k(const uint8_t* const* row, int64_t blocks, const Input* in, __m512* tot, int64_t ahead) {
  const __m512i low = _mm512_set1_epi8(0x0F), top = _mm512_set1_epi8(0x30);
  const __m512i quarter = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
  for (int64_t s = 0; s < blocks; ++s) {
    const int8_t* xs[NT];
    const int32_t* off[NT];
    __m512 steps[NT];
    for (int t = 0; t < NT; ++t) {
      xs[t] = in[t].rounded.q.data() + 256 * s;
      off[t] = in[t].sum4_x32.data() + 64 * s;
      steps[t] = _mm512_loadu_ps(in[t].steps_twice.data() + 16 * s);
    }
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) {
      const uint8_t* blk = row[i] + 210 * s;
      if (ahead) prefetch(blk, 210, ahead);
      const __m128i sc = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 192));
      const __m512 scale = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(sc)), d = _mm512_set1_ps(half_at(blk + 208));
      __m512 f[NT];  // lane k: d x scale k x the step of its group of 32
      __m512 acc_t[NT];  // this row's accumulators, in registers while it is read
      for (int t = 0; t < NT; ++t) {
        f[t] = _mm512_mul_ps(_mm512_mul_ps(scale, steps[t]), d);
        acc_t[t] = tot[i * NT + t];
      }
#pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) {
        const __m512i l = _mm512_loadu_si512(blk + 64 * h);
        const __m512i hs = both_halves(blk + 128 + 32 * h, 2);
        const __m512i w[2] = {
            _mm512_or_si512(_mm512_and_si512(l, low), _mm512_and_si512(_mm512_slli_epi16(hs, 4), top)),
            _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l, 4), low), _mm512_and_si512(hs, top)),
        };
#pragma GCC unroll 2
        for (int m = 0; m < 2; ++m) {
          const int c = 2 * h + m;  // 64 codes: sub-blocks 4c .. 4c + 3
          const __m512i pick = _mm512_add_epi32(quarter, _mm512_set1_epi32(4 * c));
          for (int t = 0; t < NT; ++t) {
            const __m512i acc =
                _mm512_dpbusd_epi32(_mm512_loadu_si512(off[t] + 16 * c), w[m], _mm512_loadu_si512(xs[t] + 64 * c));
            acc_t[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc), _mm512_permutexvar_ps(pick, f[t]), acc_t[t]);
          }
        }
      }
      for (int t = 0; t < NT; ++t) tot[i * NT + t] = acc_t[t];
    }
  }
}

// out[t * 4 + i] = row (r0 + i) . input t, for i < n and t < NT.
template <int NT>
LILY_VNNI512 void dot_tile_k(const Matrix& W, int64_t r0, int64_t n, const Input* in, float* out, int64_t ahead) {
  const uint8_t* row[4];
  const size_t row_bytes = W.row_bytes();  // once a tile, not once a row: it is not inline
  for (int64_t i = 0; i < 4; ++i) row[i] = static_cast<const uint8_t*>(W.data) + (r0 + std::min(i, n - 1)) * row_bytes;
  __m512 tot[4 * NT], mins[4 * NT];
  for (int i = 0; i < 4 * NT; ++i) tot[i] = mins[i] = _mm512_setzero_ps();
  const int64_t blocks = W.cols / 256;
  switch (static_cast<GgmlType>(W.ggml_type)) {
    case GgmlType::Q4_K: q45_k<false, NT>(row, blocks, in, tot, mins, ahead); break;
    case GgmlType::Q5_K: q45_k<true, NT>(row, blocks, in, tot, mins, ahead); break;
    default: q6_k<NT>(row, blocks, in, tot, ahead); break;
  }
  for (int t = 0; t < NT; ++t)
    for (int64_t i = 0; i < n; ++i)
      out[t * 4 + i] = _mm512_reduce_add_ps(tot[i * NT + t]) -
                       _mm512_mask_reduce_add_ps(static_cast<__mmask16>(0xFF00), mins[i * NT + t]);
}
#undef LILY_VNNI512
}  // namespace vnni512

// AVX2: pairs of products summed in 16 bits (at most 2 x 128 x 127, short of
// saturating), then pairs of those in 32.
#define GK_NS avx2
#define GK_TARGET "avx2,fma,f16c"
#define GK_DOT(acc, u8, s8) \
  _mm256_add_epi32((acc), _mm256_madd_epi16(_mm256_maddubs_epi16((u8), (s8)), _mm256_set1_epi16(1)))
#include "lily/backend/cpu/ggml_int8_kernels.inc"
#undef GK_NS
#undef GK_TARGET
#undef GK_DOT
#pragma GCC diagnostic pop
#endif

namespace {
bool k_format(const Matrix& W) {
  const auto t = static_cast<GgmlType>(W.ggml_type);
  return t == GgmlType::Q4_K || t == GgmlType::Q5_K || t == GgmlType::Q6_K;
}
}  // namespace

void dot_rows(int8::Kernel k, const Matrix& W, int64_t r0, int64_t n, const Input& in, float* out, int64_t ahead) {
  if (!supports(W)) throw Error("ggml int8 dot_rows: not a block format these kernels take");
#if defined(__x86_64__) && defined(__GNUC__)
  if (k == int8::Kernel::Vnni) {
    if (k_format(W)) {
      return vnni512::dot_tile_k<1>(W, r0, n, &in, out, ahead);
    }
    return vnni::dot_tile<1>(W, r0, n, &in, out, ahead);
  }
  if (k == int8::Kernel::Avx2) return avx2::dot_tile<1>(W, r0, n, &in, out, ahead);
#endif
  (void)r0, (void)n, (void)in, (void)out, (void)ahead;
  throw Error("ggml int8 dot_rows: no int8 kernel in this context");
}

void dot_tile(int8::Kernel k, const Matrix& W, int64_t r0, int64_t n, const Input* in, int64_t nt, float* out,
              int64_t ahead) {
  int64_t t = 0;
#if defined(__x86_64__) && defined(__GNUC__)
  // pairs of inputs meet each decoded block: the unpacking is paid once for both
  if (supports(W)) {
    if (k == int8::Kernel::Vnni && k_format(W))
      for (; t + 2 <= nt; t += 2) vnni512::dot_tile_k<2>(W, r0, n, in + t, out + 4 * t, t == 0 ? ahead : 0);
    else if (k == int8::Kernel::Vnni)
      for (; t + 2 <= nt; t += 2) vnni::dot_tile<2>(W, r0, n, in + t, out + 4 * t, t == 0 ? ahead : 0);
    else if (k == int8::Kernel::Avx2) {
      // a row's accumulators for four inputs stay in registers: four share each decoded block
      for (; t + 4 <= nt; t += 4) avx2::dot_tile<4>(W, r0, n, in + t, out + 4 * t, t == 0 ? ahead : 0);
      for (; t + 2 <= nt; t += 2) avx2::dot_tile<2>(W, r0, n, in + t, out + 4 * t, t == 0 ? ahead : 0);
    }
  }
#endif
  for (; t < nt; ++t) dot_rows(k, W, r0, n, in[t], out + 4 * t, t == 0 ? ahead : 0);
}

}  // namespace lily::cpu::ggml_int8
