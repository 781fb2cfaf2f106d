#include "lily/backend/cpu/ggml_int8_tile.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "lily/backend/cpu/avx2_transpose.h"
#include "lily/error.h"
#include "lily/io/dtype.h"
#include "lily/quant/gguf_blocks.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace lily::cpu::ggml_int8 {

bool tile_supported(int8::Kernel k, const Matrix& W) {
  const auto type = static_cast<GgmlType>(W.ggml_type);
  return k == int8::Kernel::Avx2 && supports(W) &&
         (type == GgmlType::Q4_0 || type == GgmlType::Q4_K || type == GgmlType::Q6_K);
}

#if defined(__x86_64__) && defined(__GNUC__)
#define LILY_AVX2_TILE __attribute__((target("avx2,fma,f16c")))
namespace {
constexpr int64_t kBlockBytes = 18;  // an f16 scale d, then 16 bytes: weight j's code in byte j % 16, low nibble for j < 16
constexpr int64_t kTileBlockBytes = 8 * 32;  // a block of the tile: four columns of low nibbles, four of high ones

struct Tile {
  std::vector<uint8_t> codes;  // [blocks][8][32]: column c (c < 4 low, else high nibbles), lane i = row i's four codes
  std::vector<float> d;        // [blocks][8]
};

typedef int32_t unaligned_i32 __attribute__((may_alias, aligned(1)));

// NT tokens' totals zeroed, and their int8 inputs.
template <int NT>
LILY_AVX2_TILE inline void start_tokens(const Input* in, __m256* tot, const int8_t** x) {
  for (int t = 0; t < NT; ++t) {
    tot[t] = _mm256_setzero_ps();
    x[t] = in[t].rounded.q.data();
  }
}

// The first n lanes (rows) of each of NT tokens' totals into y.
template <int NT>
LILY_AVX2_TILE inline void store_rows(const __m256* tot, int64_t n, float* y, int64_t y_stride) {
  for (int t = 0; t < NT; ++t) {
    alignas(32) float lanes[kTileRows];
    _mm256_store_ps(lanes, tot[t]);
    for (int64_t i = 0; i < n; ++i) y[t * y_stride + i] = lanes[i];
  }
}


// The tile's eight rows of `row_bytes` from row r0 (a short tile repeats
// its last row), and where the next tile's rows start, when there is one to
// read ahead: eight streams the hardware prefetcher follows poorly, so each
// line of the next tile's rows is asked into L2 as this one's is read.
struct TileRows {
  const uint8_t* rows[kTileRows];
  int64_t next = 0;  // 0: no next tile
  TileRows(const Matrix& W, int64_t r0, int64_t n, int64_t row_bytes) {
    for (int64_t i = 0; i < kTileRows; ++i)
      rows[i] = static_cast<const uint8_t*>(W.data) + (r0 + std::min(i, n - 1)) * row_bytes;
    if (r0 + 2 * kTileRows <= W.rows) next = kTileRows * row_bytes;
  }
  // The next tile's lines of bytes at .. at + bytes - 1 of each row.
  LILY_AVX2_TILE void prefetch(int64_t at, int64_t bytes) const {
    if (next == 0) return;
    for (int64_t line = 0; line < bytes; line += 64)
      for (int i = 0; i < kTileRows; ++i) _mm_prefetch(reinterpret_cast<const char*>(rows[i]) + at + line + next, _MM_HINT_T1);
  }
};

LILY_AVX2_TILE void load_tile(const Matrix& W, int64_t r0, int64_t n, Tile& tile) {
  const int64_t blocks = W.cols / 32;
  const TileRows tr(W, r0, n, blocks * kBlockBytes);
  const uint8_t* const* rows = tr.rows;
  tile.codes.resize(static_cast<size_t>(blocks * kTileBlockBytes));
  tile.d.resize(static_cast<size_t>(blocks * kTileRows));
  const __m256i low = _mm256_set1_epi8(0x0F);
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t at = b * kBlockBytes;
    if (at % 64 < kBlockBytes) tr.prefetch(at, 1);
    __m256i r[4];  // halves: row i | row i + 4, four 4-byte columns each
    for (int i = 0; i < 4; ++i)
      r[i] = _mm256_set_m128i(_mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[i + 4] + at + 2)),
                              _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[i] + at + 2)));
    uint16_t h[kTileRows];
    for (int i = 0; i < kTileRows; ++i) std::memcpy(&h[i], rows[i] + at, 2);
    _mm256_storeu_ps(tile.d.data() + b * kTileRows, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h))));
    const __m256i t0 = _mm256_unpacklo_epi32(r[0], r[1]), t1 = _mm256_unpackhi_epi32(r[0], r[1]);  // columns 0, 1 | 2, 3
    const __m256i t2 = _mm256_unpacklo_epi32(r[2], r[3]), t3 = _mm256_unpackhi_epi32(r[2], r[3]);
    const __m256i col[4] = {_mm256_unpacklo_epi64(t0, t2), _mm256_unpackhi_epi64(t0, t2),
                            _mm256_unpacklo_epi64(t1, t3), _mm256_unpackhi_epi64(t1, t3)};
    uint8_t* out = tile.codes.data() + b * kTileBlockBytes;
    for (int c = 0; c < 4; ++c) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + c * 32), _mm256_and_si256(col[c], low));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + (4 + c) * 32),
                          _mm256_and_si256(_mm256_srli_epi16(col[c], 4), low));
    }
  }
}

// NT inputs against a loaded tile, block by block: each lane's exact sum of
// codes x inputs, less 8 x the block's input codes, converted and scaled by
// d x step.
template <int NT>
LILY_AVX2_TILE void tile_inputs(const Tile& tile, int64_t blocks, int64_t n, const Input* in, float* y,
                                int64_t y_stride) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 tot[NT];
  const int8_t* x[NT];
  start_tokens<NT>(in, tot, x);
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* codes = tile.codes.data() + b * kTileBlockBytes;
    __m256i part[NT];
    for (int t = 0; t < NT; ++t) part[t] = _mm256_setzero_si256();
    for (int c = 0; c < 4; ++c) {  // low nibbles of column c: inputs 4c..4c+3 of the block; high ones: 16 more
      const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes + c * 32));
      const __m256i hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes + (4 + c) * 32));
      for (int t = 0; t < NT; ++t) {
        const __m256i e = _mm256_set1_epi32(*reinterpret_cast<const unaligned_i32*>(x[t] + 32 * b + 4 * c));
        const __m256i o = _mm256_set1_epi32(*reinterpret_cast<const unaligned_i32*>(x[t] + 32 * b + 16 + 4 * c));
        part[t] = add_products16(add_products16(part[t], lo, e), hi, o);
      }
    }
    const __m256 d = _mm256_loadu_ps(tile.d.data() + b * kTileRows);
    for (int t = 0; t < NT; ++t) {
      const int32_t block_codes = in[t].codes16[2 * b] + in[t].codes16[2 * b + 1];
      const __m256i s = _mm256_sub_epi32(_mm256_madd_epi16(part[t], ones), _mm256_set1_epi32(8 * block_codes));
      tot[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_mul_ps(d, _mm256_set1_ps(in[t].rounded.step[b])), tot[t]);
    }
  }
  store_rows<NT>(tot, n, y, y_stride);
}

LILY_AVX2_TILE void q4_0_tile_rows(const Matrix& W, int64_t r0, int64_t n, const Input* in, int64_t T, float* y,
                                   int64_t y_stride) {
  thread_local Tile tile;  // a prompt calls this for every eight rows of every product
  load_tile(W, r0, n, tile);
  in_threes(T, [&](auto nt, int64_t t) {
    tile_inputs<decltype(nt)::value>(tile, W.cols / 32, n, in + t, y + r0 + t * y_stride, y_stride);
  });
}

// Q4_K: super-blocks of 256 weights in 144 bytes (f16 d and dmin, twelve
// bytes of 6-bit scales and mins for eight sub-blocks of 32, then four
// chunks of 32 bytes: chunk j's low nibbles are sub-block 2j, its high ones
// sub-block 2j + 1), w = d x scale x q - dmin x min. A sub-block's eight
// columns of a lane sum 16 products of at most 15 x 127 a 16-bit piece; the
// pieces meet the lane's row's scale in _mm256_madd_epi16 (the scale in both
// halves of the lane), the super-block sums in 32 bits (at most 8 x 63 x
// 60,960) and ends in one scaled add, and the mins meet the exact input sums.
constexpr int64_t kSuperBytes = 144;
constexpr int64_t kSuperTileBytes = 8 * 8 * 32;  // eight sub-blocks of eight columns of 32 bytes

struct KTile {
  std::vector<uint8_t> codes;    // [supers][sub-block][column][32]: lane i = row i's four codes
  std::vector<int32_t> scales;   // [supers][sub-block][8]: row i's scale in both 16-bit halves of lane i
  std::vector<float> mins, d;    // [supers][sub-block][8]: dmin x min; [supers][8]
};

LILY_AVX2_TILE void load_k_tile(const Matrix& W, int64_t r0, int64_t n, KTile& tile) {
  const int64_t supers = W.cols / 256;
  const TileRows tr(W, r0, n, supers * kSuperBytes);
  const uint8_t* const* rows = tr.rows;
  tile.codes.resize(static_cast<size_t>(supers * kSuperTileBytes));
  tile.scales.resize(static_cast<size_t>(supers * 8 * kTileRows));
  tile.mins.resize(tile.scales.size());
  tile.d.resize(static_cast<size_t>(supers * kTileRows));
  const __m256i low = _mm256_set1_epi8(0x0F);
  __m256i cols[8];
  for (int64_t s = 0; s < supers; ++s) {
    const int64_t at = s * kSuperBytes;
    tr.prefetch(at, kSuperBytes);
    for (int64_t i = 0; i < kTileRows; ++i) {
      const uint8_t* blk = rows[i] + at;
      uint16_t h[2];
      std::memcpy(h, blk, 4);
      const float d = f16_to_float(h[0]), dmin = f16_to_float(h[1]);
      int sc[8], mn[8];
      quant::scale_min_k4(blk + 4, sc, mn);
      tile.d[s * kTileRows + i] = d;
      for (int j = 0; j < 8; ++j) {
        tile.scales[(s * 8 + j) * kTileRows + i] = sc[j] | (sc[j] << 16);
        tile.mins[(s * 8 + j) * kTileRows + i] = dmin * static_cast<float>(mn[j]);
      }
    }
    uint8_t* out = tile.codes.data() + s * kSuperTileBytes;
    for (int j = 0; j < 4; ++j) {
      transpose8_avx2(rows, at + 16 + 32 * j, cols);
      for (int c = 0; c < 8; ++c) {
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + ((2 * j) * 8 + c) * 32), _mm256_and_si256(cols[c], low));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + ((2 * j + 1) * 8 + c) * 32),
                            _mm256_and_si256(_mm256_srli_epi16(cols[c], 4), low));
      }
    }
  }
}

// NT tokens through a tile of super-blocks: sums(s, codes, x, acc) adds
// each token's integer sums of super-block s into acc, whose tokens' totals
// fold(s, t, acc[t], total) then takes.
template <int NT, class Sums, class Fold>
LILY_AVX2_TILE inline void over_supers(const std::vector<uint8_t>& tile_codes, int64_t supers, int64_t n,
                                       const Input* in, float* y, int64_t y_stride, Sums sums, Fold fold) {
  __m256 tot[NT];
  const int8_t* x[NT];
  start_tokens<NT>(in, tot, x);
  for (int64_t s = 0; s < supers; ++s) {
    __m256i acc[NT];
    for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_si256();
    sums(s, tile_codes.data() + s * kSuperTileBytes, x, acc);
    for (int t = 0; t < NT; ++t) tot[t] = fold(s, t, acc[t], tot[t]);
  }
  store_rows<NT>(tot, n, y, y_stride);
}

template <int NT>
LILY_AVX2_TILE void k_tile_inputs(const KTile& tile, int64_t supers, int64_t n, const Input* in, float* y,
                                  int64_t y_stride) {
  auto sums = [&](int64_t s, const uint8_t* codes, const int8_t* const* x, __m256i* acc) LILY_AVX2_TILE {
    for (int sub = 0; sub < 8; ++sub) {  // sub-block sub: inputs 32 sub .. 32 sub + 31, column c four of them
      __m256i part[NT];
      for (int t = 0; t < NT; ++t) part[t] = _mm256_setzero_si256();
#pragma GCC unroll 8
      for (int c = 0; c < 8; ++c) {
        const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes + (sub * 8 + c) * 32));
        for (int t = 0; t < NT; ++t) {
          const __m256i e = _mm256_set1_epi32(*reinterpret_cast<const unaligned_i32*>(x[t] + 256 * s + 32 * sub + 4 * c));
          part[t] = add_products16(part[t], q, e);
        }
      }
      const __m256i scale = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(tile.scales.data() + (s * 8 + sub) * kTileRows));
      for (int t = 0; t < NT; ++t) acc[t] = _mm256_add_epi32(acc[t], _mm256_madd_epi16(part[t], scale));
    }
  };
  auto fold = [&](int64_t s, int t, __m256i acc, __m256 total) LILY_AVX2_TILE {
    for (int sub = 0; sub < 8; ++sub)
      total = _mm256_fnmadd_ps(_mm256_loadu_ps(tile.mins.data() + (s * 8 + sub) * kTileRows),
                               _mm256_set1_ps(in[t].rounded.sum[8 * s + sub]), total);
    const __m256 d = _mm256_loadu_ps(tile.d.data() + s * kTileRows);
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc), _mm256_mul_ps(d, _mm256_set1_ps(in[t].rounded.step[8 * s])), total);
  };
  over_supers<NT>(tile.codes, supers, n, in, y, y_stride, sums, fold);
}

LILY_AVX2_TILE void q4_k_tile_rows(const Matrix& W, int64_t r0, int64_t n, const Input* in, int64_t T, float* y,
                                   int64_t y_stride) {
  thread_local KTile tile;
  load_k_tile(W, r0, n, tile);
  in_threes(T, [&](auto nt, int64_t t) {
    k_tile_inputs<decltype(nt)::value>(tile, W.cols / 256, n, in + t, y + r0 + t * y_stride, y_stride);
  });
}
// Q6_K: super-blocks of 256 weights in 210 bytes (128 bytes of low
// nibbles, 64 of high bit pairs, sixteen int8 scales, f16 d), w = d x scale
// x (q - 32) for sub-blocks of 16. The tile holds q (0-63) in the Q4_K
// tile's order, a 32-input chunk's eight columns. A 16-bit piece of a lane
// holds two columns' four products of at most 63 x 127 (32,004); the first
// pair of a sub-block starts from -16 x the sub-block's 16 input codes
// (at most 32,512 in size), so the lane's madd with its scale in both halves
// adds scale x (sum q x - 32 x sum x); the super-block sums in 32 bits (at
// most 256 x 63 x 127 x 128) and ends in one scaled add.
constexpr int64_t kQ6SuperBytes = 210;

struct Q6Tile {
  std::vector<uint8_t> codes;   // [supers][chunk][column][32], as KTile's
  std::vector<int32_t> scales;  // [supers][sub-block of 16][8]: row i's int8 scale in both 16-bit halves
  std::vector<float> d;         // [supers][8]
};

LILY_AVX2_TILE void load_q6_tile(const Matrix& W, int64_t r0, int64_t n, Q6Tile& tile) {
  const int64_t supers = W.cols / 256;
  const TileRows tr(W, r0, n, supers * kQ6SuperBytes);
  const uint8_t* const* rows = tr.rows;
  tile.codes.resize(static_cast<size_t>(supers * kSuperTileBytes));
  tile.scales.resize(static_cast<size_t>(supers * 16 * kTileRows));
  tile.d.resize(static_cast<size_t>(supers * kTileRows));
  const __m256i low = _mm256_set1_epi8(0x0F), pair = _mm256_set1_epi8(0x03);
  __m256i ql[8], qh[8];
  for (int64_t s = 0; s < supers; ++s) {
    const int64_t at = s * kQ6SuperBytes;
    tr.prefetch(at, kQ6SuperBytes);
    for (int64_t i = 0; i < kTileRows; ++i) {
      const uint8_t* blk = rows[i] + at;
      uint16_t h;
      std::memcpy(&h, blk + 208, 2);
      tile.d[s * kTileRows + i] = f16_to_float(h);
      for (int j = 0; j < 16; ++j) {
        const uint16_t sc = static_cast<uint16_t>(static_cast<int16_t>(static_cast<int8_t>(blk[192 + j])));
        tile.scales[(s * 16 + j) * kTileRows + i] = static_cast<int32_t>(sc | (static_cast<uint32_t>(sc) << 16));
      }
    }
    uint8_t* out = tile.codes.data() + s * kSuperTileBytes;
    // chunk k (inputs 32k .. 32k + 31) of half h = k / 4, m = k % 4: low
    // nibbles from bytes 64h + 32 (m % 2) .. of the 128 (the high nibble
    // when m >= 2), high pairs from bytes 128 + 32h .. at bit 2m
    for (int h = 0; h < 2; ++h) {
      transpose8_avx2(rows, at + 128 + 32 * h, qh);
      for (int half = 0; half < 2; ++half) {
        transpose8_avx2(rows, at + 64 * h + 32 * half, ql);
        for (int nib = 0; nib < 2; ++nib) {
          const int m = 2 * nib + half, chunk = 4 * h + m;
          for (int c = 0; c < 8; ++c) {
            const __m256i lo = _mm256_and_si256(_mm256_srli_epi16(ql[c], 4 * nib), low);
            const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(qh[c], 2 * m), pair);
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + (chunk * 8 + c) * 32),
                                _mm256_or_si256(lo, _mm256_slli_epi16(hi, 4)));
          }
        }
      }
    }
  }
}

template <int NT>
LILY_AVX2_TILE void q6_tile_inputs(const Q6Tile& tile, int64_t supers, int64_t n, const Input* in, float* y,
                                   int64_t y_stride) {
  auto sums = [&](int64_t s, const uint8_t* codes, const int8_t* const* x, __m256i* acc) LILY_AVX2_TILE {
    for (int j = 0; j < 16; ++j) {  // sub-block j: inputs 16 j .. 16 j + 15, columns 4 (j % 2) .. of chunk j / 2
      const uint8_t* col = codes + ((j / 2) * 8 + 4 * (j % 2)) * 32;
      const __m256i scale = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(tile.scales.data() + (s * 16 + j) * kTileRows));
      for (int t = 0; t < NT; ++t) {
        const int8_t* xs = x[t] + 256 * s + 16 * j;
        __m256i first = _mm256_set1_epi16(static_cast<int16_t>(-16 * in[t].codes16[16 * s + j]));
        __m256i second = _mm256_setzero_si256();
        for (int c = 0; c < 2; ++c)
          first = add_products16(first, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(col + c * 32)),
                                 _mm256_set1_epi32(*reinterpret_cast<const unaligned_i32*>(xs + 4 * c)));
        for (int c = 2; c < 4; ++c)
          second = add_products16(second, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(col + c * 32)),
                                  _mm256_set1_epi32(*reinterpret_cast<const unaligned_i32*>(xs + 4 * c)));
        acc[t] = _mm256_add_epi32(acc[t], _mm256_add_epi32(_mm256_madd_epi16(first, scale), _mm256_madd_epi16(second, scale)));
      }
    }
  };
  auto fold = [&](int64_t s, int t, __m256i acc, __m256 total) LILY_AVX2_TILE {
    const __m256 d = _mm256_loadu_ps(tile.d.data() + s * kTileRows);
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc), _mm256_mul_ps(d, _mm256_set1_ps(in[t].rounded.step[8 * s])), total);
  };
  over_supers<NT>(tile.codes, supers, n, in, y, y_stride, sums, fold);
}

LILY_AVX2_TILE void q6_k_tile_rows(const Matrix& W, int64_t r0, int64_t n, const Input* in, int64_t T, float* y,
                                   int64_t y_stride) {
  thread_local Q6Tile tile;
  load_q6_tile(W, r0, n, tile);
  in_threes(T, [&](auto nt, int64_t t) {
    q6_tile_inputs<decltype(nt)::value>(tile, W.cols / 256, n, in + t, y + r0 + t * y_stride, y_stride);
  });
}
}  // namespace
#undef LILY_AVX2_TILE
#endif

void tile_rows(int8::Kernel k, const Matrix& W, int64_t r0, int64_t n, const Input* in, int64_t T, float* y,
               int64_t y_stride) {
  if (n < 1 || n > kTileRows) throw Error("ggml int8 tile_rows: a tile has 1 to 8 rows");
#if defined(__x86_64__) && defined(__GNUC__)
  // qualified: lookup by the argument int8::Kernel also finds int8::tile_supported
  if (ggml_int8::tile_supported(k, W)) {
    if (static_cast<GgmlType>(W.ggml_type) == GgmlType::Q4_K) return q4_k_tile_rows(W, r0, n, in, T, y, y_stride);
    if (static_cast<GgmlType>(W.ggml_type) == GgmlType::Q6_K) return q6_k_tile_rows(W, r0, n, in, T, y, y_stride);
    return q4_0_tile_rows(W, r0, n, in, T, y, y_stride);
  }
#endif
  (void)k, (void)W, (void)r0, (void)in, (void)T, (void)y, (void)y_stride;
  throw Error("ggml int8 tile_rows: not a matrix or CPU these tiles take");
}

}  // namespace lily::cpu::ggml_int8
