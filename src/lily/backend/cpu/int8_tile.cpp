#include "lily/backend/cpu/int8_tile.h"

#include <algorithm>
#include <vector>

#include "lily/backend/cpu/avx2_transpose.h"
#include "lily/backend/cpu/matmul.h"
#include "lily/backend/cpu/neon_int8.h"
#include "lily/error.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

// GCC 12 reports its own AVX-512 intrinsics (the undefined pass-through
// operand of their masked forms) as maybe uninitialised.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace lily::cpu::int8 {

bool tile_supported(Kernel k, const Matrix& W) {
  // AVX2's byte product sums pairs into 16 bits: 8-bit weights (up to 255 x
  // 127 a product) would saturate it, so they stay on the decode kernel there
  return supports(W) && (k == Kernel::Vnni || k == Kernel::ArmI8mm || (k == Kernel::Avx2 && W.bits == 4));
}

#if defined(__x86_64__) && defined(__GNUC__)
#define LILY_TILE_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni")))
namespace {
// A tile's rows as the products read them: for each four-byte column d of
// the packed rows one vector whose lane i is row i's four bytes (4-bit
// weights as two vectors, low nibbles and high ones, each byte a weight),
// and per group the sixteen rows' scales and biases.
struct Tile {
  std::vector<uint8_t> lo, hi;     // [row_bytes / 4][64]; hi for 4-bit only
  std::vector<float> scale, bias;  // [groups * 16]
  std::vector<float> s, b;         // [16 * groups]: row by row, before the transposition
};

// The sixteen rows' 64 bytes at `at` transposed: out[d] lane i = row i's
// four bytes d. Pairs of rows are interleaved by 32 bits, then by 64, which
// leaves each 128-bit lane holding four rows of one column; two shuffles of
// whole lanes then gather each column's four lane pieces.
LILY_TILE_TARGET inline void transpose16(const uint8_t* const* rows, int64_t at, __m512i* out) {
  __m512i r[16], t[16];
  for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_si512(rows[i] + at);
  for (int k = 0; k < 8; ++k) {
    t[2 * k] = _mm512_unpacklo_epi32(r[2 * k], r[2 * k + 1]);
    t[2 * k + 1] = _mm512_unpackhi_epi32(r[2 * k], r[2 * k + 1]);
  }
  for (int k = 0; k < 4; ++k) {  // r[4k + m] lane L: rows 4k..4k+3 of column 4L + m
    r[4 * k + 0] = _mm512_unpacklo_epi64(t[4 * k], t[4 * k + 2]);
    r[4 * k + 1] = _mm512_unpackhi_epi64(t[4 * k], t[4 * k + 2]);
    r[4 * k + 2] = _mm512_unpacklo_epi64(t[4 * k + 1], t[4 * k + 3]);
    r[4 * k + 3] = _mm512_unpackhi_epi64(t[4 * k + 1], t[4 * k + 3]);
  }
  for (int m = 0; m < 4; ++m) {  // a 4 x 4 transposition of the lanes of r[m], r[4 + m], r[8 + m], r[12 + m]
    const __m512i v0 = _mm512_shuffle_i32x4(r[m], r[4 + m], 0x44), v1 = _mm512_shuffle_i32x4(r[m], r[4 + m], 0xEE);
    const __m512i v2 = _mm512_shuffle_i32x4(r[8 + m], r[12 + m], 0x44), v3 = _mm512_shuffle_i32x4(r[8 + m], r[12 + m], 0xEE);
    out[0 + m] = _mm512_shuffle_i32x4(v0, v2, 0x88);
    out[4 + m] = _mm512_shuffle_i32x4(v0, v2, 0xDD);
    out[8 + m] = _mm512_shuffle_i32x4(v1, v3, 0x88);
    out[12 + m] = _mm512_shuffle_i32x4(v1, v3, 0xDD);
  }
}

template <int Bits>
LILY_TILE_TARGET void load_tile(const Matrix& W, int64_t r0, int64_t n, Tile& tile) {
  const int64_t groups = W.cols / W.group_size, row_bytes = W.cols * Bits / 8;
  const uint8_t* rows[16];
  for (int64_t i = 0; i < 16; ++i)  // a short tile repeats its last row
    rows[i] = static_cast<const uint8_t*>(W.data) + (r0 + std::min(i, n - 1)) * row_bytes;
  tile.lo.resize(static_cast<size_t>(row_bytes * 16));
  if (Bits == 4) tile.hi.resize(tile.lo.size());
  const __m512i low = _mm512_set1_epi8(0x0F);
  __m512i cols[16];
  // The weights come from memory once per prompt, sixteen streams at a time,
  // which the hardware prefetcher follows poorly: each line of the next
  // tile's rows is asked into L2 as the same line of this one is read, so
  // they arrive while this tile meets the inputs.
  const int64_t next = 16 * row_bytes;
  for (int64_t at = 0; at < row_bytes; at += 64) {
    if (r0 + 32 <= W.rows)
      for (int i = 0; i < 16; ++i) _mm_prefetch(reinterpret_cast<const char*>(rows[i]) + at + next, _MM_HINT_T1);
    transpose16(rows, at, cols);
    uint8_t* lo = tile.lo.data() + at * 16;  // column at / 4 + d at (at / 4 + d) * 64
    for (int d = 0; d < 16; ++d) {
      if constexpr (Bits == 4) {
        _mm512_storeu_si512(lo + d * 64, _mm512_and_si512(cols[d], low));
        _mm512_storeu_si512(tile.hi.data() + at * 16 + d * 64, _mm512_and_si512(_mm512_srli_epi16(cols[d], 4), low));
      } else {
        _mm512_storeu_si512(lo + d * 64, cols[d]);
      }
    }
  }
  tile.s.resize(static_cast<size_t>(16 * groups));
  tile.b.resize(tile.s.size());
  tile.scale.resize(tile.s.size());
  tile.bias.resize(tile.s.size());
  for (int64_t i = 0; i < 16; ++i)
    scales_to_float(Isa::Avx512Vnni, W, r0 + std::min(i, n - 1), tile.s.data() + i * groups, tile.b.data() + i * groups);
  const __m512i by_row = _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                            _mm512_set1_epi32(static_cast<int>(groups)));
  for (int64_t g = 0; g < groups; ++g) {
    const __m512i idx = _mm512_add_epi32(by_row, _mm512_set1_epi32(static_cast<int>(g)));
    _mm512_storeu_ps(tile.scale.data() + g * 16, _mm512_i32gather_ps(idx, tile.s.data(), 4));
    _mm512_storeu_ps(tile.bias.data() + g * 16, _mm512_i32gather_ps(idx, tile.b.data(), 4));
  }
}

// Four input bytes broadcast to every lane (an operand the byte product
// reads from memory itself).
typedef int32_t unaligned_i32 __attribute__((may_alias, aligned(1)));
LILY_TILE_TARGET inline __m512i four_bytes(const int8_t* p) { return _mm512_set1_epi32(*reinterpret_cast<const unaligned_i32*>(p)); }

// NT inputs against a loaded tile. Each lane sums a group of its row in
// two integer chains (exact, so their order is free), then adds the group's
// sum times scale x step; the bias terms (bias x exact input sum) go in a
// sum of their own, added at the end.
template <int Bits, int GB, int NT>
LILY_TILE_TARGET void tile_inputs(const Tile& tile, int64_t cols, int64_t groups, int64_t n, const Input* in, float* y, int64_t y_stride) {
  constexpr int64_t kWords = GB / 4;  // four-byte columns a group spans
  __m512 tot[NT], bias[NT];
  const int8_t *xe[NT], *xo[NT];
  for (int t = 0; t < NT; ++t) {
    tot[t] = bias[t] = _mm512_setzero_ps();
    xe[t] = in[t].q.data();
    xo[t] = in[t].q.data() + cols / 2;
  }
  const uint8_t* lo_at = tile.lo.data();
  const uint8_t* hi_at = tile.hi.data();
  for (int64_t g = 0; g < groups; ++g) {
    __m512i a0[NT], a1[NT];
    for (int t = 0; t < NT; ++t) a0[t] = a1[t] = _mm512_setzero_si512();
#pragma GCC unroll 32
    for (int64_t j = 0; j < kWords; ++j) {
      const int64_t d = g * kWords + j;
      const __m512i lo = _mm512_loadu_si512(lo_at + d * 64);
      if constexpr (Bits == 4) {
        const __m512i hi = _mm512_loadu_si512(hi_at + d * 64);
        for (int t = 0; t < NT; ++t) {  // byte d*4 + j holds inputs 2(d*4 + j) (low) and 2(d*4 + j) + 1 (high)
          a0[t] = _mm512_dpbusd_epi32(a0[t], lo, four_bytes(xe[t] + 4 * d));
          a1[t] = _mm512_dpbusd_epi32(a1[t], hi, four_bytes(xo[t] + 4 * d));
        }
      } else if ((j & 1) == 0) {
        for (int t = 0; t < NT; ++t) a0[t] = _mm512_dpbusd_epi32(a0[t], lo, four_bytes(xe[t] + 4 * d));
      } else {
        for (int t = 0; t < NT; ++t) a1[t] = _mm512_dpbusd_epi32(a1[t], lo, four_bytes(xe[t] + 4 * d));
      }
    }
    const __m512 scale = _mm512_loadu_ps(tile.scale.data() + g * 16), b = _mm512_loadu_ps(tile.bias.data() + g * 16);
    for (int t = 0; t < NT; ++t) {
      const __m512 cs = _mm512_mul_ps(scale, _mm512_set1_ps(in[t].step[g]));
      tot[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(a0[t], a1[t])), cs, tot[t]);
      bias[t] = _mm512_fmadd_ps(b, _mm512_set1_ps(in[t].sum[g]), bias[t]);
    }
  }
  const __mmask16 m = static_cast<__mmask16>((1u << n) - 1);
  for (int t = 0; t < NT; ++t) _mm512_mask_storeu_ps(y + t * y_stride, m, _mm512_add_ps(tot[t], bias[t]));
}

template <int Bits, int GB>
LILY_TILE_TARGET void tile_rows_of(const Matrix& W, int64_t r0, int64_t n, const Input* in, int64_t T, float* y, int64_t y_stride) {
  thread_local Tile tile;  // a prompt calls this for every sixteen rows of every product
  load_tile<Bits>(W, r0, n, tile);
  const int64_t groups = W.cols / W.group_size;
  int64_t t = 0;
  for (; t + 4 <= T; t += 4) tile_inputs<Bits, GB, 4>(tile, W.cols, groups, n, in + t, y + t * y_stride + r0, y_stride);
  switch (T - t) {
    case 3: return tile_inputs<Bits, GB, 3>(tile, W.cols, groups, n, in + t, y + t * y_stride + r0, y_stride);
    case 2: return tile_inputs<Bits, GB, 2>(tile, W.cols, groups, n, in + t, y + t * y_stride + r0, y_stride);
    case 1: return tile_inputs<Bits, GB, 1>(tile, W.cols, groups, n, in + t, y + t * y_stride + r0, y_stride);
    default: return;
  }
}
}  // namespace
#undef LILY_TILE_TARGET

// The same tiles for CPUs with AVX2 alone, 4-bit weights: eight rows to a
// vector (a row's four bytes a 32-bit lane), two vectors for sixteen rows.
// _mm256_maddubs_epi16 sums two byte products into each 16-bit half of a
// lane; four columns of low and high nibbles add at most 16 products of at
// most 15 x 127 there (30,480, short of 16-bit overflow) before one
// _mm256_madd_epi16 folds the halves into the lane's 32-bit sum. So a group
// costs a byte product per four weights of eight rows, and one conversion
// and scaled add per eight rows, where the row-at-a-time kernel pays those
// per row.
#define LILY_AVX2_TILE __attribute__((target("avx2,fma,f16c")))
namespace {
namespace avx2 {
constexpr int kRows = 8;  // a vector's rows

struct Tile {
  std::vector<uint8_t> lo, hi;     // [row_bytes / 4][32]: column d, lane i = row i's four nibbles
  std::vector<float> scale, bias;  // [groups * 8]
  std::vector<float> s, b;         // [8 * groups]: row by row, before the transposition
};

LILY_AVX2_TILE void load_tile(const Matrix& W, int64_t r0, int64_t n, Tile& tile) {
  const int64_t groups = W.cols / W.group_size, row_bytes = W.cols / 2;
  const uint8_t* rows[kRows];
  for (int64_t i = 0; i < kRows; ++i)  // a short tile repeats its last row
    rows[i] = static_cast<const uint8_t*>(W.data) + (r0 + std::min(i, n - 1)) * row_bytes;
  tile.lo.resize(static_cast<size_t>(row_bytes * kRows));
  tile.hi.resize(tile.lo.size());
  const __m256i low = _mm256_set1_epi8(0x0F);
  __m256i cols[8];
  // as the AVX-512 tiles do: each line of the next tile's rows is asked into
  // L2 as the same line of this one is read
  const int64_t next = kRows * row_bytes;
  for (int64_t at = 0; at < row_bytes; at += 32) {
    if (at % 64 == 0 && r0 + 2 * kRows <= W.rows)
      for (int i = 0; i < kRows; ++i) _mm_prefetch(reinterpret_cast<const char*>(rows[i]) + at + next, _MM_HINT_T1);
    transpose8_avx2(rows, at, cols);
    for (int d = 0; d < 8; ++d) {
      const int64_t o = (at / 4 + d) * 32;
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(tile.lo.data() + o), _mm256_and_si256(cols[d], low));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(tile.hi.data() + o),
                          _mm256_and_si256(_mm256_srli_epi16(cols[d], 4), low));
    }
  }
  tile.s.resize(static_cast<size_t>(kRows * groups));
  tile.b.resize(tile.s.size());
  tile.scale.resize(tile.s.size());
  tile.bias.resize(tile.s.size());
  for (int64_t i = 0; i < kRows; ++i)
    scales_to_float(Isa::Avx2, W, r0 + std::min(i, n - 1), tile.s.data() + i * groups, tile.b.data() + i * groups);
  for (int64_t g = 0; g < groups; ++g)
    for (int64_t i = 0; i < kRows; ++i) {
      tile.scale[g * kRows + i] = tile.s[i * groups + g];
      tile.bias[g * kRows + i] = tile.b[i * groups + g];
    }
}

// NT inputs against a loaded tile: per group, each lane's exact integer sum
// (16-bit pieces of four columns folded into 32 bits), converted once and
// scaled by scale x step, and the bias term bias x exact input sum, added
// in that order group by group.
template <int GB, int NT>
LILY_AVX2_TILE void tile_inputs(const Tile& tile, int64_t cols, int64_t groups, int64_t n, const Input* in, float* y,
                                int64_t y_stride) {
  constexpr int64_t kWords = GB / 4;  // four-byte columns a group spans
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 tot[NT];
  const int8_t *xe[NT], *xo[NT];
  for (int t = 0; t < NT; ++t) {
    tot[t] = _mm256_setzero_ps();
    xe[t] = in[t].q.data();
    xo[t] = in[t].q.data() + cols / 2;
  }
  const uint8_t* lo_at = tile.lo.data();
  const uint8_t* hi_at = tile.hi.data();
  for (int64_t g = 0; g < groups; ++g) {
    __m256i sum[NT];
    for (int t = 0; t < NT; ++t) sum[t] = _mm256_setzero_si256();
    for (int64_t j0 = 0; j0 < kWords; j0 += 4) {
      __m256i part[NT];
      for (int t = 0; t < NT; ++t) part[t] = _mm256_setzero_si256();
#pragma GCC unroll 4
      for (int64_t j = j0; j < j0 + 4; ++j) {
        const int64_t d = g * kWords + j;
        const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(lo_at + d * 32));
        const __m256i hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(hi_at + d * 32));
        for (int t = 0; t < NT; ++t) {  // byte 4d + k holds inputs 2(4d + k) (low nibble) and 2(4d + k) + 1 (high)
          const __m256i e = _mm256_set1_epi32(*reinterpret_cast<const unaligned_i32*>(xe[t] + 4 * d));
          const __m256i o = _mm256_set1_epi32(*reinterpret_cast<const unaligned_i32*>(xo[t] + 4 * d));
          part[t] = add_products16(add_products16(part[t], lo, e), hi, o);
        }
      }
      for (int t = 0; t < NT; ++t) sum[t] = _mm256_add_epi32(sum[t], _mm256_madd_epi16(part[t], ones));
    }
    const __m256 scale = _mm256_loadu_ps(tile.scale.data() + g * kRows), b = _mm256_loadu_ps(tile.bias.data() + g * kRows);
    for (int t = 0; t < NT; ++t) {
      const __m256 cs = _mm256_mul_ps(scale, _mm256_set1_ps(in[t].step[g]));
      tot[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum[t]), cs, tot[t]);
      tot[t] = _mm256_fmadd_ps(b, _mm256_set1_ps(in[t].sum[g]), tot[t]);
    }
  }
  for (int t = 0; t < NT; ++t) {
    alignas(32) float lanes[kRows];
    _mm256_store_ps(lanes, tot[t]);
    for (int64_t i = 0; i < n; ++i) y[t * y_stride + i] = lanes[i];
  }
}

template <int GB>
LILY_AVX2_TILE void tile_rows_of(const Matrix& W, int64_t r0, int64_t n, const Input* in, int64_t T, float* y,
                                 int64_t y_stride) {
  thread_local Tile tile;
  const int64_t groups = W.cols / W.group_size;
  for (int64_t h = 0; h < n; h += kRows) {  // sixteen rows as two tiles of eight
    const int64_t m = std::min<int64_t>(kRows, n - h);
    load_tile(W, r0 + h, m, tile);
    float* yh = y + r0 + h;
    in_threes(T, [&](auto nt, int64_t t) {
      tile_inputs<GB, decltype(nt)::value>(tile, W.cols, groups, m, in + t, yh + t * y_stride, y_stride);
    });
  }
}
}  // namespace avx2
}  // namespace
#undef LILY_AVX2_TILE
#endif

void tile_rows(Kernel k, const Matrix& W, int64_t r0, int64_t n, const Input* in, int64_t T, float* y,
               int64_t y_stride) {
  if (n < 1 || n > kTileRows) throw Error("int8 tile_rows: a tile has 1 to 16 rows");
#if defined(__x86_64__) && defined(__GNUC__)
  if (k == Kernel::Avx2 && tile_supported(k, W)) {
    if (W.group_size == 64) return avx2::tile_rows_of<32>(W, r0, n, in, T, y, y_stride);
    return avx2::tile_rows_of<64>(W, r0, n, in, T, y, y_stride);
  }
  if (k == Kernel::Vnni && tile_supported(k, W)) {
    const int gb = W.bits * W.group_size / 8;
    if (W.bits == 4 && gb == 32) return tile_rows_of<4, 32>(W, r0, n, in, T, y, y_stride);
    if (W.bits == 4) return tile_rows_of<4, 64>(W, r0, n, in, T, y, y_stride);
    if (gb == 64) return tile_rows_of<8, 64>(W, r0, n, in, T, y, y_stride);
    return tile_rows_of<8, 128>(W, r0, n, in, T, y, y_stride);
  }
#elif LILY_NEON_INT8
  if (k == Kernel::ArmI8mm && tile_supported(k, W)) return neon::tile_rows(W, r0, n, in, T, y, y_stride);
#endif
  (void)k, (void)W, (void)r0, (void)in, (void)T, (void)y, (void)y_stride;
  throw Error("int8 tile_rows: not a matrix or CPU these tiles take");
}

}  // namespace lily::cpu::int8
