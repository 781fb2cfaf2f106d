#include "lily/backend/cpu/neon_int8.h"

#if LILY_NEON_INT8

#include <arm_neon.h>

#include <algorithm>
#include <vector>

#include "lily/io/dtype.h"

namespace lily::cpu::int8::neon {

namespace {
// The instructions past baseline Armv8-A, per function: the caller has
// checked the CPU (Isa::ArmDot, Isa::ArmI8mm) before calling.
#if defined(__clang__)
#define LILY_SDOT __attribute__((target("dotprod")))
#define LILY_I8MM __attribute__((target("dotprod,i8mm")))
#else
#define LILY_SDOT __attribute__((target("arch=armv8.2-a+dotprod")))
#define LILY_I8MM __attribute__((target("arch=armv8.2-a+dotprod+i8mm")))
#endif

// Row r's scales and biases as floats, groups of them each.
void row_scales(const Matrix& W, int64_t r, int64_t groups, float* s, float* b) {
  const size_t off = static_cast<size_t>(r * groups) * dtype_size(W.scale_dtype);
  convert_to_float(W.scale_dtype, static_cast<const uint8_t*>(W.scales) + off, s, static_cast<size_t>(groups));
  convert_to_float(W.scale_dtype, static_cast<const uint8_t*>(W.biases) + off, b, static_cast<size_t>(groups));
}

inline uint8x16_t low_halves(uint8x16_t a, uint8x16_t b) {  // a's bytes 0-7, then b's
  return vreinterpretq_u8_u64(vzip1q_u64(vreinterpretq_u64_u8(a), vreinterpretq_u64_u8(b)));
}
inline uint8x16_t high_halves(uint8x16_t a, uint8x16_t b) {  // a's bytes 8-15, then b's
  return vreinterpretq_u8_u64(vzip2q_u64(vreinterpretq_u64_u8(a), vreinterpretq_u64_u8(b)));
}
inline int8x16_t low_halves(int8x16_t a, int8x16_t b) {
  return vreinterpretq_s8_u8(low_halves(vreinterpretq_u8_s8(a), vreinterpretq_u8_s8(b)));
}
inline int8x16_t high_halves(int8x16_t a, int8x16_t b) {
  return vreinterpretq_s8_u8(high_halves(vreinterpretq_u8_s8(a), vreinterpretq_u8_s8(b)));
}

// Bits-bit rows whose groups are GB packed bytes.
template <int Bits, int GB>
LILY_SDOT void rows_sdot(const Matrix& W, int64_t r0, int64_t n, const Input* in, int64_t nt, float* out) {
  const int64_t cols = W.cols, groups = cols / W.group_size, row_bytes = cols * Bits / 8;
  thread_local std::vector<float> s, b;
  s.resize(static_cast<size_t>(groups));
  b.resize(static_cast<size_t>(groups));
  const uint8x16_t low = vdupq_n_u8(0x0F), flip = vdupq_n_u8(0x80);
  const int8x16_t ones = vdupq_n_s8(1);
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t* q = static_cast<const uint8_t*>(W.data) + (r0 + i) * row_bytes;
    row_scales(W, r0 + i, groups, s.data(), b.data());
    for (int64_t t = 0; t < nt; ++t) {
      const int8_t* x = in[t].q.data();  // 4-bit: the even inputs, then (cols / 2 on) the odd ones
      float32x4_t tot = vdupq_n_f32(0.f);
      float bias = 0.f;
      for (int64_t g = 0; g < groups; ++g) {
        int32x4_t acc = vdupq_n_s32(0);
        for (int64_t at = g * GB; at < (g + 1) * GB; at += 16) {
          const uint8x16_t w = vld1q_u8(q + at);
          if constexpr (Bits == 4) {
            acc = vdotq_s32(acc, vreinterpretq_s8_u8(vandq_u8(w, low)), vld1q_s8(x + at));
            acc = vdotq_s32(acc, vreinterpretq_s8_u8(vshrq_n_u8(w, 4)), vld1q_s8(x + cols / 2 + at));
          } else {
            const int8x16_t xv = vld1q_s8(x + at);
            acc = vdotq_s32(acc, vreinterpretq_s8_u8(veorq_u8(w, flip)), xv);  // code - 128
            acc = vmlaq_n_s32(acc, vdotq_s32(vdupq_n_s32(0), ones, xv), 128);
          }
        }
        tot = vfmaq_n_f32(tot, vcvtq_f32_s32(acc), s[g] * in[t].step[g]);
        bias += b[g] * in[t].sum[g];
      }
      out[t * 4 + i] = vaddvq_f32(tot) + bias;
    }
  }
}

// Four rows (two pairs, a short block repeating its last row) against every
// token, four at a time (two pairs, likewise).
template <int Bits, int GB>
LILY_I8MM void tile_i8mm(const Matrix& W, int64_t r0, int64_t n, const Input* in, int64_t T, float* y,
                         int64_t y_stride) {
  const int64_t cols = W.cols, groups = cols / W.group_size, row_bytes = cols * Bits / 8;
  thread_local std::vector<float> sb;  // [4][2][groups]: each row's scales, then its biases
  sb.resize(static_cast<size_t>(8 * groups));
  const uint8x16_t low = vdupq_n_u8(0x0F);
  constexpr int kParts = Bits == 4 ? 4 : 2;  // 2 x 8 blocks of a pair of rows per 16 bytes of each
  for (int64_t h = 0; h < n; h += 4) {
    const int64_t m = std::min<int64_t>(4, n - h);
    const uint8_t* rows[4];
    const float *sc[4], *bi[4];
    for (int64_t k = 0; k < 4; ++k) {
      const int64_t r = r0 + h + std::min(k, m - 1);
      rows[k] = static_cast<const uint8_t*>(W.data) + r * row_bytes;
      sc[k] = sb.data() + 2 * k * groups;
      bi[k] = sc[k] + groups;
      row_scales(W, r, groups, sb.data() + 2 * k * groups, sb.data() + (2 * k + 1) * groups);
    }
    for (int64_t t = 0; t < T; t += 4) {
      const int64_t nt = std::min<int64_t>(4, T - t);
      const Input* tok[4];
      for (int64_t j = 0; j < 4; ++j) tok[j] = in + t + std::min(j, nt - 1);
      // lanes of [p][u]: (row 2p, token 2u), (2p, 2u + 1), (2p + 1, 2u), (2p + 1, 2u + 1)
      float32x4_t tot[2][2], bias[2][2];
      for (auto& v : tot) v[0] = v[1] = vdupq_n_f32(0.f);
      for (auto& v : bias) v[0] = v[1] = vdupq_n_f32(0.f);
      for (int64_t g = 0; g < groups; ++g) {
        int32x4_t acc[2][2];
        for (auto& v : acc) v[0] = v[1] = vdupq_n_s32(0);
        for (int64_t at = g * GB; at < (g + 1) * GB; at += 16) {
          uint8x16_t A[2][kParts];
          for (int p = 0; p < 2; ++p) {
            const uint8x16_t a = vld1q_u8(rows[2 * p] + at), b = vld1q_u8(rows[2 * p + 1] + at);
            if constexpr (Bits == 4) {
              const uint8x16_t al = vandq_u8(a, low), bl = vandq_u8(b, low);
              const uint8x16_t ah = vshrq_n_u8(a, 4), bh = vshrq_n_u8(b, 4);
              A[p][0] = low_halves(al, bl), A[p][1] = high_halves(al, bl);
              A[p][2] = low_halves(ah, bh), A[p][3] = high_halves(ah, bh);
            } else {
              A[p][0] = low_halves(a, b), A[p][1] = high_halves(a, b);
            }
          }
          for (int u = 0; u < 2; ++u) {
            const int8_t* xa = tok[2 * u]->q.data();
            const int8_t* xb = tok[2 * u + 1]->q.data();
            int8x16_t B[kParts];
            const int8x16_t ea = vld1q_s8(xa + at), eb = vld1q_s8(xb + at);
            B[0] = low_halves(ea, eb), B[1] = high_halves(ea, eb);
            if constexpr (Bits == 4) {  // the odd inputs, met by the high nibbles
              const int8x16_t oa = vld1q_s8(xa + cols / 2 + at), ob = vld1q_s8(xb + cols / 2 + at);
              B[2] = low_halves(oa, ob), B[3] = high_halves(oa, ob);
            }
            for (int p = 0; p < 2; ++p)
              for (int k = 0; k < kParts; ++k) acc[p][u] = vusmmlaq_s32(acc[p][u], A[p][k], B[k]);
          }
        }
        for (int u = 0; u < 2; ++u) {
          const float32x2_t step = {tok[2 * u]->step[g], tok[2 * u + 1]->step[g]};
          const float32x2_t sum = {tok[2 * u]->sum[g], tok[2 * u + 1]->sum[g]};
          for (int p = 0; p < 2; ++p) {
            const float32x4_t scale = vcombine_f32(vmul_n_f32(step, sc[2 * p][g]), vmul_n_f32(step, sc[2 * p + 1][g]));
            tot[p][u] = vfmaq_f32(tot[p][u], vcvtq_f32_s32(acc[p][u]), scale);
            bias[p][u] = vfmaq_f32(bias[p][u], vcombine_f32(vdup_n_f32(bi[2 * p][g]), vdup_n_f32(bi[2 * p + 1][g])),
                                   vcombine_f32(sum, sum));
          }
        }
      }
      for (int p = 0; p < 2; ++p)
        for (int u = 0; u < 2; ++u) {
          float lanes[4];
          vst1q_f32(lanes, vaddq_f32(tot[p][u], bias[p][u]));
          for (int a = 0; a < 2; ++a)
            for (int c = 0; c < 2; ++c) {
              const int64_t row = 2 * p + a, token = 2 * u + c;
              if (row < m && token < nt) y[(t + token) * y_stride + r0 + h + row] = lanes[2 * a + c];
            }
        }
    }
  }
}
}  // namespace

void dot_rows(const Matrix& W, int64_t r0, int64_t n, const Input* in, int64_t nt, float* out) {
  const int gb = W.bits * W.group_size / 8;
  if (W.bits == 4 && gb == 32) return rows_sdot<4, 32>(W, r0, n, in, nt, out);
  if (W.bits == 4) return rows_sdot<4, 64>(W, r0, n, in, nt, out);
  if (gb == 64) return rows_sdot<8, 64>(W, r0, n, in, nt, out);
  return rows_sdot<8, 128>(W, r0, n, in, nt, out);
}

void tile_rows(const Matrix& W, int64_t r0, int64_t n, const Input* in, int64_t T, float* y, int64_t y_stride) {
  const int gb = W.bits * W.group_size / 8;
  if (W.bits == 4 && gb == 32) return tile_i8mm<4, 32>(W, r0, n, in, T, y, y_stride);
  if (W.bits == 4) return tile_i8mm<4, 64>(W, r0, n, in, T, y, y_stride);
  if (gb == 64) return tile_i8mm<8, 64>(W, r0, n, in, T, y, y_stride);
  return tile_i8mm<8, 128>(W, r0, n, in, T, y, y_stride);
}

}  // namespace lily::cpu::int8::neon

#endif
