#include "lily/backend/cpu/amx_matmul.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "lily/backend/cpu/int8_dot.h"
#include "lily/backend/cpu/kernels.h"
#include "lily/backend/cpu/matmul.h"
#include "lily/backend/cpu/thread_pool.h"
#include "lily/error.h"

#if defined(__x86_64__) && defined(__GNUC__) && defined(__linux__)
#define LILY_AMX_BUILD 1
#include <immintrin.h>
#endif

// GCC 12 reports its own AVX-512 intrinsics (the undefined pass-through
// operand of their masked forms) as maybe uninitialised.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace lily::cpu::amx {

bool supports(const Matrix& W) { return int8::packed_format(W) && W.cols % W.group_size == 0; }

#if LILY_AMX_BUILD

namespace {
constexpr int64_t kTile = 16;    // tokens per B tile, weight rows per A tile
constexpr int64_t kDepth = 64;   // bytes of K per tile product

// The inputs of T tokens, rounded, laid out as B tiles: for token tile `tt`
// and K tile `kt`, 16 rows of 4 consecutive inputs of each of 16 tokens. For
// 4-bit weights the 64 inputs of a K tile are taken as the 32 even ones then
// the 32 odd ones, the order of the low then high nibbles of 32 packed bytes.
struct TileInputs {
  int64_t token_tiles = 0, k_tiles = 0, groups = 0;
  std::vector<int8_t> b;             // [token tile][k tile][16][16 tokens][4]
  std::vector<float> step, sum;      // [token tile][group][16 tokens]; zero for padding tokens
};

TileInputs tile_inputs(Isa isa, const float* x, int64_t T, const Matrix& W) {
  const int64_t K = W.cols, gs = W.group_size;
  TileInputs a;
  a.token_tiles = (T + kTile - 1) / kTile;
  a.k_tiles = K / kDepth;
  a.groups = K / gs;
  a.b.assign(static_cast<size_t>(a.token_tiles * a.k_tiles * kTile * kDepth), 0);
  a.step.assign(static_cast<size_t>(a.token_tiles * a.groups * kTile), 0.f);
  a.sum.assign(a.step.size(), 0.f);
  int8_t ordered[kDepth];
  for (int64_t t = 0; t < T; ++t) {
    const int8::Input in = int8::quantize_input(isa, x + t * K, K, static_cast<int>(gs), W.bits == 4);
    const int64_t tt = t / kTile, lane = t % kTile;
    for (int64_t g = 0; g < a.groups; ++g) {
      a.step[(tt * a.groups + g) * kTile + lane] = in.step[g];
      a.sum[(tt * a.groups + g) * kTile + lane] = in.sum[g];
    }
    for (int64_t kt = 0; kt < a.k_tiles; ++kt) {
      const int8_t* src = in.q.data() + kt * kDepth;
      if (W.bits == 4) {  // the split input: even ones, then odd ones from cols / 2 on
        std::memcpy(ordered, in.q.data() + kt * 32, 32);
        std::memcpy(ordered + 32, in.q.data() + K / 2 + kt * 32, 32);
        src = ordered;
      }
      int8_t* dst = a.b.data() + (tt * a.k_tiles + kt) * kTile * kDepth;
      for (int64_t r = 0; r < kTile; ++r) std::memcpy(dst + r * kDepth + lane * 4, src + r * 4, 4);
    }
  }
  return a;
}

struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

#define LILY_AMX __attribute__((target("amx-tile,amx-int8,avx512f,avx512bw,avx512vl,avx2")))

// Tiles 0 (sums), 1 (weights) and 2 (inputs), each 16 rows of 64 bytes; set
// once per thread (the configuration is thread state).
LILY_AMX void configure_tiles() {
  thread_local bool done = false;
  if (done) return;
  TileConfig cfg;
  for (int i = 0; i < 3; ++i) {
    cfg.colsb[i] = kDepth;
    cfg.rows[i] = kTile;
  }
  // GCC 12 does not see that LDTILECFG reads the configuration and drops
  // the stores above without this barrier.
  asm volatile("" : : "r"(&cfg) : "memory");
  _tile_loadconfig(&cfg);
  done = true;
}

// Weight rows n0 .. n0+nr-1 (nr <= 16; a short block repeats its last row)
// against every token tile.
LILY_AMX void row_block(const TileInputs& a, const Matrix& W, int64_t n0, int64_t nr, int64_t T, float* y,
                        uint8_t* rows, float* wscale, float* wbias) {
  const int64_t K = W.cols, G = a.groups, N = W.rows, per_group = W.group_size / kDepth;
  const int64_t row_bytes = static_cast<int64_t>(W.row_bytes());
  const __m256i low = _mm256_set1_epi8(0x0F);
  for (int64_t i = 0; i < kTile; ++i) {
    const int64_t r = n0 + std::min(i, nr - 1);
    const auto* src = static_cast<const uint8_t*>(W.row(r));
    uint8_t* dst = rows + i * K;
    if (W.bits == 4) {
      for (int64_t kt = 0; kt < a.k_tiles; ++kt) {
        // the weights stream from memory once (an expert's few tokens use
        // them once): the next blocks' rows are asked for as this one goes,
        // into L1 one block on and into L2 three blocks on
        if (kt % 2 == 0) {
          _mm_prefetch(reinterpret_cast<const char*>(src + kt * 32 + kTile * row_bytes), _MM_HINT_T0);
          _mm_prefetch(reinterpret_cast<const char*>(src + kt * 32 + 3 * kTile * row_bytes), _MM_HINT_T2);
        }
        const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + kt * 32));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + kt * kDepth), _mm256_and_si256(v, low));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + kt * kDepth + 32),
                            _mm256_and_si256(_mm256_srli_epi16(v, 4), low));
      }
    } else {
      for (int64_t k = 0; k < K; k += 64) {
        _mm_prefetch(reinterpret_cast<const char*>(src + k + kTile * row_bytes), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(src + k + 3 * kTile * row_bytes), _MM_HINT_T2);
      }
      std::memcpy(dst, src, static_cast<size_t>(K));
    }
    scales_to_float(Isa::Amx, W, r, wscale + i * G, wbias + i * G);
  }
  alignas(64) int32_t sums[kTile * kTile];
  alignas(64) float out[kTile];
  for (int64_t tt = 0; tt < a.token_tiles; ++tt) {
    __m512 acc[kTile];
    for (auto& v : acc) v = _mm512_setzero_ps();
    for (int64_t g = 0; g < G; ++g) {
      _tile_zero(0);
      for (int64_t kt = g * per_group; kt < (g + 1) * per_group; ++kt) {
        _tile_loadd(1, rows + kt * kDepth, K);
        _tile_loadd(2, a.b.data() + (tt * a.k_tiles + kt) * kTile * kDepth, kDepth);
        _tile_dpbusd(0, 1, 2);
      }
      _tile_stored(0, sums, kTile * 4);
      const __m512 step = _mm512_loadu_ps(a.step.data() + (tt * G + g) * kTile);
      const __m512 sum = _mm512_loadu_ps(a.sum.data() + (tt * G + g) * kTile);
      for (int64_t i = 0; i < kTile; ++i) {
        const __m512 bias_term = _mm512_fmadd_ps(_mm512_set1_ps(wbias[i * G + g]), sum, acc[i]);
        const __m512 scale = _mm512_mul_ps(_mm512_set1_ps(wscale[i * G + g]), step);
        acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(sums + i * kTile)), scale, bias_term);
      }
    }
    const int64_t nt = std::min(kTile, T - tt * kTile);
    for (int64_t i = 0; i < nr; ++i) {
      _mm512_store_ps(out, acc[i]);
      for (int64_t t = 0; t < nt; ++t) y[(tt * kTile + t) * N + n0 + i] = out[t];
    }
  }
}
}  // namespace

void matmul(const CpuContext& ctx, const float* x, int64_t T, const Matrix& W, float* y) {
  if (!ctx.amx()) throw Error("amx::matmul: the context does not allow AMX tiles");
  const TileInputs a = tile_inputs(ctx.isa, x, T, W);
  const int64_t blocks = (W.rows + kTile - 1) / kTile;
  ctx.threads().parallel_for(blocks, 1, [&](int64_t b, int64_t e) {
    configure_tiles();
    std::vector<uint8_t> rows(static_cast<size_t>(kTile * W.cols));
    std::vector<float> wscale(static_cast<size_t>(kTile * a.groups)), wbias(wscale.size());
    for (int64_t blk = b; blk < e; ++blk) {
      const int64_t n0 = blk * kTile;
      row_block(a, W, n0, std::min(kTile, W.rows - n0), T, y, rows.data(), wscale.data(), wbias.data());
    }
  });
}

#else  // no AMX in this build

void matmul(const CpuContext&, const float*, int64_t, const Matrix&, float*) {
  throw Error("amx::matmul: this build has no AMX kernels");
}

#endif

}  // namespace lily::cpu::amx
