// What the AVX2 prompt tiles (int8_tile, ggml_int8_tile) share: the
// transposition they start from, where eight rows' 32 bytes become eight
// vectors whose 32-bit lane i is row i's four bytes of one column (so a
// token's four input bytes, broadcast, meet the same four columns of eight
// rows in one byte product), the in-order sums of the byte products, and the
// walk through a prompt's tokens.
#pragma once

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#include <cstdint>
#include <type_traits>

namespace lily::cpu {

// out[d] lane i = bytes 4d..4d+3 of rows[i] + at. Rows are interleaved by
// 32 bits, then by 64, which leaves each 128-bit half holding four rows of
// one column; the halves are then paired.
__attribute__((target("avx2"))) inline void transpose8_avx2(const uint8_t* const* rows, int64_t at, __m256i* out) {
  __m256i r[8], t[8];
  for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows[i] + at));
  for (int k = 0; k < 4; ++k) {  // t[2k] halves: rows 2k, 2k+1 of columns (0, 1 | 4, 5); t[2k+1]: (2, 3 | 6, 7)
    t[2 * k] = _mm256_unpacklo_epi32(r[2 * k], r[2 * k + 1]);
    t[2 * k + 1] = _mm256_unpackhi_epi32(r[2 * k], r[2 * k + 1]);
  }
  for (int k = 0; k < 2; ++k) {  // r[4k + m] halves: rows 4k..4k+3 of column m | m + 4
    r[4 * k + 0] = _mm256_unpacklo_epi64(t[4 * k], t[4 * k + 2]);
    r[4 * k + 1] = _mm256_unpackhi_epi64(t[4 * k], t[4 * k + 2]);
    r[4 * k + 2] = _mm256_unpacklo_epi64(t[4 * k + 1], t[4 * k + 3]);
    r[4 * k + 3] = _mm256_unpackhi_epi64(t[4 * k + 1], t[4 * k + 3]);
  }
  for (int m = 0; m < 4; ++m) {
    out[m] = _mm256_permute2x128_si256(r[m], r[4 + m], 0x20);
    out[4 + m] = _mm256_permute2x128_si256(r[m], r[4 + m], 0x31);
  }
}

// acc + the 16-bit pair sums of u8 x s8, added in program order. Left to
// itself GCC re-associates a tile's chain of such adds into a tree, computes
// a whole block's products before adding any, and spills them to the stack
// (AVX2 has sixteen registers); the empty asm pins each sum where it is.
__attribute__((target("avx2"))) inline __m256i add_products16(__m256i acc, __m256i u8, __m256i s8) {
  acc = _mm256_add_epi16(acc, _mm256_maddubs_epi16(u8, s8));
  asm("" : "+x"(acc));
  return acc;
}

// A prompt's T tokens through a loaded tile three at a time (four would
// spill AVX2's sixteen registers), ending in pairs rather than a single
// token where that is possible: run(std::integral_constant<int, k>, t)
// takes tokens t .. t + k - 1.
template <class Run>
inline void in_threes(int64_t T, Run run) {
  int64_t t = 0;
  for (; T - t >= 5 || T - t == 3; t += 3) run(std::integral_constant<int, 3>{}, t);
  for (; t + 2 <= T; t += 2) run(std::integral_constant<int, 2>{}, t);
  if (t < T) run(std::integral_constant<int, 1>{}, t);
}

}  // namespace lily::cpu
#endif
