// Compiled with -ffp-contract=off (CMakeLists.txt): a fused multiply-add
// would round once where gguf-py rounds twice, and the results would differ.
#include "lily/quant/gguf_blocks.h"

#include <cstring>
#include <string>

#include "lily/error.h"
#include "lily/io/dtype.h"

namespace lily::quant {

namespace {

constexpr int kQK = 256;  // elements of a K-quant or IQ4_XS super-block
constexpr int8_t kIq4Values[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

float half(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return f16_to_float(h);
}

// The 4-bit value of element j of a 32-element block whose 16 bytes hold
// elements 0-15 in the low nibbles and 16-31 in the high ones.
int nibble(const uint8_t* qs, int j) { return j < 16 ? qs[j] & 15 : qs[j - 16] >> 4; }

void q4_0(const uint8_t* b, float* y) {
  const float d = half(b);
  for (int j = 0; j < 32; ++j) y[j] = d * static_cast<float>(nibble(b + 2, j) - 8);
}

void q4_1(const uint8_t* b, float* y) {
  const float d = half(b), m = half(b + 2);
  for (int j = 0; j < 32; ++j) y[j] = d * static_cast<float>(nibble(b + 4, j)) + m;
}

void q5_0(const uint8_t* b, float* y) {
  const float d = half(b);
  uint32_t qh;
  std::memcpy(&qh, b + 2, 4);
  for (int j = 0; j < 32; ++j) {
    const int q = nibble(b + 6, j) | static_cast<int>(((qh >> j) & 1) << 4);
    y[j] = d * static_cast<float>(q - 16);
  }
}

void q5_1(const uint8_t* b, float* y) {
  const float d = half(b), m = half(b + 2);
  uint32_t qh;
  std::memcpy(&qh, b + 4, 4);
  for (int j = 0; j < 32; ++j) {
    const int q = nibble(b + 8, j) | static_cast<int>(((qh >> j) & 1) << 4);
    y[j] = d * static_cast<float>(q) + m;
  }
}

void q8_0(const uint8_t* b, float* y) {
  const float d = half(b);
  for (int j = 0; j < 32; ++j) y[j] = static_cast<float>(static_cast<int8_t>(b[2 + j])) * d;
}

void q2_k(const uint8_t* b, float* y) {
  const uint8_t* scales = b;      // 16: low nibble scale, high nibble min, per 16 elements
  const uint8_t* qs = b + 16;     // 64: 2-bit values
  const float d = half(b + 80), dmin = half(b + 82);
  for (int e = 0; e < kQK; ++e) {
    const int half_ = e / 128, s = (e % 128) / 32, l = e % 32, sub = e / 16;
    const int q = (qs[half_ * 32 + l] >> (2 * s)) & 3;
    const float dl = d * static_cast<float>(scales[sub] & 15), ml = dmin * static_cast<float>(scales[sub] >> 4);
    y[e] = dl * static_cast<float>(q) - ml;
  }
}

void q3_k(const uint8_t* b, float* y) {
  const uint8_t* hmask = b;   // 32: the third bit, inverted
  const uint8_t* qs = b + 32; // 64: the low two bits
  const uint8_t* sc = b + 96; // 12: sixteen 6-bit scales
  const float d = half(b + 108);
  float dl[16];
  for (int i = 0; i < 16; ++i) {
    const int lo = i < 8 ? sc[i] & 15 : sc[i - 8] >> 4;
    const int hi = (sc[8 + i % 4] >> (2 * (i / 4))) & 3;
    dl[i] = d * static_cast<float>(static_cast<int8_t>(lo | (hi << 4)) - 32);
  }
  for (int e = 0; e < kQK; ++e) {
    const int half_ = e / 128, s = (e % 128) / 32, l = e % 32;
    const int low = (qs[half_ * 32 + l] >> (2 * s)) & 3;
    const int high = ((hmask[l] >> (e / 32)) & 1) ^ 1;
    y[e] = dl[e / 16] * static_cast<float>(low - (high << 2));
  }
}

}  // namespace

void scale_min_k4(const uint8_t* s, int* sc, int* mn) {
  for (int j = 0; j < 4; ++j) {
    sc[j] = s[j] & 63;
    mn[j] = s[4 + j] & 63;
    sc[4 + j] = (s[8 + j] & 15) | ((s[j] >> 2) & 0x30);
    mn[4 + j] = (s[8 + j] >> 4) | ((s[4 + j] >> 2) & 0x30);
  }
}

namespace {

void q4_k(const uint8_t* b, float* y) {
  const float d = half(b), dmin = half(b + 2);
  int sc[8], mn[8];
  scale_min_k4(b + 4, sc, mn);
  const uint8_t* qs = b + 16;
  for (int e = 0; e < kQK; ++e) {
    const int sub = e / 32, l = e % 32;
    const int q = (qs[(sub / 2) * 32 + l] >> (4 * (sub % 2))) & 15;
    const float ds = d * static_cast<float>(sc[sub]), dm = dmin * static_cast<float>(mn[sub]);
    y[e] = ds * static_cast<float>(q) - dm;
  }
}

void q5_k(const uint8_t* b, float* y) {
  const float d = half(b), dmin = half(b + 2);
  int sc[8], mn[8];
  scale_min_k4(b + 4, sc, mn);
  const uint8_t* qh = b + 16;
  const uint8_t* qs = b + 48;
  for (int e = 0; e < kQK; ++e) {
    const int sub = e / 32, l = e % 32;
    const int q = ((qs[(sub / 2) * 32 + l] >> (4 * (sub % 2))) & 15) | (((qh[l] >> sub) & 1) << 4);
    const float ds = d * static_cast<float>(sc[sub]), dm = dmin * static_cast<float>(mn[sub]);
    y[e] = ds * static_cast<float>(q) - dm;
  }
}

void q6_k(const uint8_t* b, float* y) {
  const uint8_t* ql = b;        // 128: low four bits
  const uint8_t* qh = b + 128;  // 64: high two bits
  const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192);  // 16 signed scales
  const float d = half(b + 208);
  for (int e = 0; e < kQK; ++e) {
    const int h = e / 128, r = e % 128;
    const int low = (ql[h * 64 + r % 64] >> (4 * (r / 64))) & 15;
    const int high = (qh[h * 32 + r % 32] >> (2 * (r / 32))) & 3;
    const float ds = d * static_cast<float>(sc[e / 16]);
    y[e] = ds * static_cast<float>(static_cast<int8_t>(low | (high << 4)) - 32);
  }
}

void iq4_nl(const uint8_t* b, float* y) {
  const float d = half(b);
  for (int j = 0; j < 32; ++j) y[j] = d * static_cast<float>(kIq4Values[nibble(b + 2, j)]);
}

void iq4_xs(const uint8_t* b, float* y) {
  const float d = half(b);
  uint16_t sh;
  std::memcpy(&sh, b + 2, 2);
  const uint8_t* sl = b + 4;   // 4: low four bits of the eight scales
  const uint8_t* qs = b + 8;   // 128
  for (int sub = 0; sub < 8; ++sub) {
    const int lo = (sl[sub / 2] >> (4 * (sub % 2))) & 15, hi = (sh >> (2 * sub)) & 3;
    const float dl = d * static_cast<float>(static_cast<int8_t>(lo | (hi << 4)) - 32);
    for (int w = 0; w < 32; ++w) {
      const int q = (qs[sub * 16 + w % 16] >> (4 * (w / 16))) & 15;
      y[sub * 32 + w] = dl * static_cast<float>(kIq4Values[q]);
    }
  }
}

using BlockFn = void (*)(const uint8_t*, float*);

BlockFn block_fn(GgmlType t) {
  switch (t) {
    case GgmlType::Q4_0: return q4_0;
    case GgmlType::Q4_1: return q4_1;
    case GgmlType::Q5_0: return q5_0;
    case GgmlType::Q5_1: return q5_1;
    case GgmlType::Q8_0: return q8_0;
    case GgmlType::Q2_K: return q2_k;
    case GgmlType::Q3_K: return q3_k;
    case GgmlType::Q4_K: return q4_k;
    case GgmlType::Q5_K: return q5_k;
    case GgmlType::Q6_K: return q6_k;
    case GgmlType::IQ4_NL: return iq4_nl;
    case GgmlType::IQ4_XS: return iq4_xs;
    default: return nullptr;
  }
}

}  // namespace

bool gguf_type_supported(GgmlType t) {
  return t == GgmlType::F32 || t == GgmlType::F16 || t == GgmlType::BF16 || block_fn(t) != nullptr;
}

void dequantize_gguf(GgmlType t, const uint8_t* src, float* dst, int64_t n) {
  switch (t) {
    case GgmlType::F32: std::memcpy(dst, src, static_cast<size_t>(n) * 4); return;
    case GgmlType::F16: convert_to_float(DType::F16, src, dst, static_cast<size_t>(n)); return;
    case GgmlType::BF16: convert_to_float(DType::BF16, src, dst, static_cast<size_t>(n)); return;
    default: break;
  }
  const BlockFn fn = block_fn(t);
  int64_t elems = 0, bytes = 0;
  if (!fn || !ggml_block_layout(t, &elems, &bytes))
    throw Error("GGUF tensors of type " + ggml_type_name(t) + " cannot be decoded yet");
  if (n % elems != 0)
    throw Error(std::to_string(n) + " elements are not whole " + ggml_type_name(t) + " blocks of " + std::to_string(elems));
  for (int64_t i = 0; i < n / elems; ++i) fn(src + i * bytes, dst + i * elems);
}

}  // namespace lily::quant
