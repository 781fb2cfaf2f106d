// Compiled with -ffp-contract=off (CMakeLists.txt): a fused multiply-add
// would round once where gguf-py rounds twice, and the results would differ.
#include "lily/quant/gguf_blocks.h"

#include <cstring>
#include <string>

#include "lily/error.h"
#include "lily/io/dtype.h"
#include "lily/quant/affine.h"

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

// A block taken apart into integers and per-group factors: element e is
// mul[g] * ival[e], plus add[g] where the format has an offset (g = e /
// group), which is gguf-py's arithmetic in its order. Both the float decode
// and the affine form are read from these parts.
struct BlockParts {
  int ival[kQK];
  float mul[16], add[16];
};

void q4_0(const uint8_t* b, BlockParts& p) {
  p.mul[0] = half(b);
  for (int j = 0; j < 32; ++j) p.ival[j] = nibble(b + 2, j) - 8;
}

void q4_1(const uint8_t* b, BlockParts& p) {
  p.mul[0] = half(b), p.add[0] = half(b + 2);
  for (int j = 0; j < 32; ++j) p.ival[j] = nibble(b + 4, j);
}

// The fifth bit of element j of a Q5_0 or Q5_1 block.
int fifth_bit(const uint8_t* qh4, int j) {
  uint32_t qh;
  std::memcpy(&qh, qh4, 4);
  return static_cast<int>(((qh >> j) & 1) << 4);
}

void q5_0(const uint8_t* b, BlockParts& p) {
  p.mul[0] = half(b);
  for (int j = 0; j < 32; ++j) p.ival[j] = (nibble(b + 6, j) | fifth_bit(b + 2, j)) - 16;
}

void q5_1(const uint8_t* b, BlockParts& p) {
  p.mul[0] = half(b), p.add[0] = half(b + 2);
  for (int j = 0; j < 32; ++j) p.ival[j] = nibble(b + 8, j) | fifth_bit(b + 4, j);
}

void q8_0(const uint8_t* b, BlockParts& p) {
  p.mul[0] = half(b);
  for (int j = 0; j < 32; ++j) p.ival[j] = static_cast<int8_t>(b[2 + j]);
}

void q2_k(const uint8_t* b, BlockParts& p) {
  const uint8_t* scales = b;      // 16: low nibble scale, high nibble min, per 16 elements
  const uint8_t* qs = b + 16;     // 64: 2-bit values
  const float d = half(b + 80), dmin = half(b + 82);
  for (int sub = 0; sub < 16; ++sub)
    p.mul[sub] = d * static_cast<float>(scales[sub] & 15), p.add[sub] = -(dmin * static_cast<float>(scales[sub] >> 4));
  for (int e = 0; e < kQK; ++e) {
    const int half_ = e / 128, s = (e % 128) / 32, l = e % 32;
    p.ival[e] = (qs[half_ * 32 + l] >> (2 * s)) & 3;
  }
}

void q3_k(const uint8_t* b, BlockParts& p) {
  const uint8_t* hmask = b;   // 32: the third bit, inverted
  const uint8_t* qs = b + 32; // 64: the low two bits
  const uint8_t* sc = b + 96; // 12: sixteen 6-bit scales
  const float d = half(b + 108);
  for (int i = 0; i < 16; ++i) {
    const int lo = i < 8 ? sc[i] & 15 : sc[i - 8] >> 4;
    const int hi = (sc[8 + i % 4] >> (2 * (i / 4))) & 3;
    p.mul[i] = d * static_cast<float>(static_cast<int8_t>(lo | (hi << 4)) - 32);
  }
  for (int e = 0; e < kQK; ++e) {
    const int half_ = e / 128, s = (e % 128) / 32, l = e % 32;
    const int low = (qs[half_ * 32 + l] >> (2 * s)) & 3;
    const int high = ((hmask[l] >> (e / 32)) & 1) ^ 1;
    p.ival[e] = low - (high << 2);
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

// Q4_K and Q5_K: eight groups of 32, each with a 6-bit scale and min.
void k4_factors(const uint8_t* b, BlockParts& p) {
  const float d = half(b), dmin = half(b + 2);
  int sc[8], mn[8];
  scale_min_k4(b + 4, sc, mn);
  for (int sub = 0; sub < 8; ++sub)
    p.mul[sub] = d * static_cast<float>(sc[sub]), p.add[sub] = -(dmin * static_cast<float>(mn[sub]));
}

void q4_k(const uint8_t* b, BlockParts& p) {
  k4_factors(b, p);
  const uint8_t* qs = b + 16;
  for (int e = 0; e < kQK; ++e) {
    const int sub = e / 32, l = e % 32;
    p.ival[e] = (qs[(sub / 2) * 32 + l] >> (4 * (sub % 2))) & 15;
  }
}

void q5_k(const uint8_t* b, BlockParts& p) {
  k4_factors(b, p);
  const uint8_t* qh = b + 16;
  const uint8_t* qs = b + 48;
  for (int e = 0; e < kQK; ++e) {
    const int sub = e / 32, l = e % 32;
    p.ival[e] = ((qs[(sub / 2) * 32 + l] >> (4 * (sub % 2))) & 15) | (((qh[l] >> sub) & 1) << 4);
  }
}

void q6_k(const uint8_t* b, BlockParts& p) {
  const uint8_t* ql = b;        // 128: low four bits
  const uint8_t* qh = b + 128;  // 64: high two bits
  const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192);  // 16 signed scales
  const float d = half(b + 208);
  for (int sub = 0; sub < 16; ++sub) p.mul[sub] = d * static_cast<float>(sc[sub]);
  for (int e = 0; e < kQK; ++e) {
    const int h = e / 128, r = e % 128;
    const int low = (ql[h * 64 + r % 64] >> (4 * (r / 64))) & 15;
    const int high = (qh[h * 32 + r % 32] >> (2 * (r / 32))) & 3;
    p.ival[e] = static_cast<int8_t>(low | (high << 4)) - 32;
  }
}

void iq4_nl(const uint8_t* b, BlockParts& p) {
  p.mul[0] = half(b);
  for (int j = 0; j < 32; ++j) p.ival[j] = kIq4Values[nibble(b + 2, j)];
}

void iq4_xs(const uint8_t* b, BlockParts& p) {
  const float d = half(b);
  uint16_t sh;
  std::memcpy(&sh, b + 2, 2);
  const uint8_t* sl = b + 4;   // 4: low four bits of the eight scales
  const uint8_t* qs = b + 8;   // 128
  for (int sub = 0; sub < 8; ++sub) {
    const int lo = (sl[sub / 2] >> (4 * (sub % 2))) & 15, hi = (sh >> (2 * sub)) & 3;
    p.mul[sub] = d * static_cast<float>(static_cast<int8_t>(lo | (hi << 4)) - 32);
    for (int w = 0; w < 32; ++w) p.ival[sub * 32 + w] = kIq4Values[(qs[sub * 16 + w % 16] >> (4 * (w / 16))) & 15];
  }
}

// A block format as parts: its parser, its group width, whether it has an
// offset, and the smallest integer it holds and the unsigned width that
// holds every one of them as an affine code (4, 6 or 8: the widths the
// backends' fast kernels read).
struct PartsFormat {
  void (*parse)(const uint8_t*, BlockParts&);
  int group;
  bool offset;
  int lowest, code_bits;
};

const PartsFormat* parts_format(GgmlType t) {
  static const PartsFormat k4_0{q4_0, 32, false, -8, 4}, k4_1{q4_1, 32, true, 0, 4}, k5_0{q5_0, 32, false, -16, 6},
      k5_1{q5_1, 32, true, 0, 6}, k8_0{q8_0, 32, false, -128, 8}, k2k{q2_k, 16, true, 0, 4},
      k3k{q3_k, 16, false, -4, 4}, k4k{q4_k, 32, true, 0, 4}, k5k{q5_k, 32, true, 0, 6},
      k6k{q6_k, 16, false, -32, 6}, knl{iq4_nl, 32, false, -127, 8}, kxs{iq4_xs, 32, false, -127, 8};
  switch (t) {
    case GgmlType::Q4_0: return &k4_0;
    case GgmlType::Q4_1: return &k4_1;
    case GgmlType::Q5_0: return &k5_0;
    case GgmlType::Q5_1: return &k5_1;
    case GgmlType::Q8_0: return &k8_0;
    case GgmlType::Q2_K: return &k2k;
    case GgmlType::Q3_K: return &k3k;
    case GgmlType::Q4_K: return &k4k;
    case GgmlType::Q5_K: return &k5k;
    case GgmlType::Q6_K: return &k6k;
    case GgmlType::IQ4_NL: return &knl;
    case GgmlType::IQ4_XS: return &kxs;
    default: return nullptr;
  }
}

// The format's layout, checked against `n` elements; throws for a type
// without parts or a partial block.
const PartsFormat& checked_format(GgmlType t, int64_t n, int64_t* elems, int64_t* bytes) {
  const PartsFormat* f = parts_format(t);
  if (!f || !ggml_block_layout(t, elems, bytes))
    throw Error("GGUF tensors of type " + ggml_type_name(t) + " cannot be decoded yet");
  if (n % *elems != 0)
    throw Error(std::to_string(n) + " elements are not whole " + ggml_type_name(t) + " blocks of " + std::to_string(*elems));
  return *f;
}

}  // namespace

bool gguf_type_supported(GgmlType t) {
  return t == GgmlType::F32 || t == GgmlType::F16 || t == GgmlType::BF16 || parts_format(t) != nullptr;
}

void dequantize_gguf(GgmlType t, const uint8_t* src, float* dst, int64_t n) {
  switch (t) {
    case GgmlType::F32: std::memcpy(dst, src, static_cast<size_t>(n) * 4); return;
    case GgmlType::F16: convert_to_float(DType::F16, src, dst, static_cast<size_t>(n)); return;
    case GgmlType::BF16: convert_to_float(DType::BF16, src, dst, static_cast<size_t>(n)); return;
    default: break;
  }
  int64_t elems = 0, bytes = 0;
  const PartsFormat& f = checked_format(t, n, &elems, &bytes);
  BlockParts p;
  for (int64_t i = 0; i < n / elems; ++i) {
    f.parse(src + i * bytes, p);
    // a group at a time, the offset decided once a group: this is the CPU's
    // float path for GGUF rows, and no element should pay a division or a branch
    for (int64_t g = 0; g < elems / f.group; ++g) {
      const int* q = p.ival + g * f.group;
      float* y = dst + i * elems + g * f.group;
      const float mul = p.mul[g], add = p.add[g];
      if (f.offset)
        for (int j = 0; j < f.group; ++j) y[j] = mul * static_cast<float>(q[j]) + add;
      else
        for (int j = 0; j < f.group; ++j) y[j] = mul * static_cast<float>(q[j]);
    }
  }
}

AffineForm gguf_to_affine(GgmlType t, const uint8_t* src, int64_t rows, int64_t cols) {
  int64_t elems = 0, bytes = 0;
  const PartsFormat& f = checked_format(t, cols, &elems, &bytes);
  AffineForm a;
  a.bits = f.code_bits;
  a.group_size = f.group;
  const size_t row_bytes = packed_row_bytes(cols, a.bits);
  const int64_t groups = cols / f.group;
  a.packed.assign(static_cast<size_t>(rows) * row_bytes, 0);
  a.scales.resize(static_cast<size_t>(rows * groups));
  a.biases.resize(static_cast<size_t>(rows * groups));
  BlockParts p;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t blk = 0; blk < cols / elems; ++blk) {
      f.parse(src + (r * (cols / elems) + blk) * bytes, p);
      for (int64_t e = 0; e < elems; ++e)
        pack(a.packed.data() + r * row_bytes, blk * elems + e, a.bits, static_cast<uint32_t>(p.ival[e] - f.lowest));
      for (int64_t g = 0; g < elems / f.group; ++g) {
        // mul * lowest is exact (a half times a few bits, times at most 8 more)
        const size_t at = static_cast<size_t>(r * groups + blk * (elems / f.group) + g);
        a.scales[at] = p.mul[g];
        a.biases[at] = p.mul[g] * static_cast<float>(f.lowest) + (f.offset ? p.add[g] : 0.0f);
      }
    }
  return a;
}

}  // namespace lily::quant
