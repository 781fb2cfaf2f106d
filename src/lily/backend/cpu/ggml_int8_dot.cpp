#include "lily/backend/cpu/ggml_int8_dot.h"

#include <algorithm>
#include <cstring>

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
    case GgmlType::Q4_K:
    case GgmlType::Q5_K:
    case GgmlType::Q6_K: return W.cols % 256 == 0;
    default: return false;
  }
}

Input quantize_input(Isa isa, const float* x, int64_t cols) {
  Input in{int8::quantize_input(isa, x, cols, kGroup, false), {}};
  in.sum4.resize(static_cast<size_t>(cols / 4));
  const int8_t* q = in.rounded.q.data();
  for (int64_t i = 0; i < cols / 4; ++i) in.sum4[i] = q[4 * i] + q[4 * i + 1] + q[4 * i + 2] + q[4 * i + 3];
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

void dot_rows(int8::Kernel k, const Matrix& W, int64_t r0, int64_t n, const Input& in, float* out, int64_t ahead) {
  if (!supports(W)) throw Error("ggml int8 dot_rows: not a block format these kernels take");
#if defined(__x86_64__) && defined(__GNUC__)
  if (k == int8::Kernel::Vnni) return vnni::dot_rows(W, r0, n, in, out, ahead);
  if (k == int8::Kernel::Avx2) return avx2::dot_rows(W, r0, n, in, out, ahead);
#endif
  (void)r0, (void)n, (void)in, (void)out, (void)ahead;
  throw Error("ggml int8 dot_rows: no int8 kernel in this context");
}

}  // namespace lily::cpu::ggml_int8
