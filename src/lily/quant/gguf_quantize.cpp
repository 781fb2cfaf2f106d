#include "lily/quant/gguf_quantize.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "lily/error.h"
#include "lily/io/dtype.h"

namespace lily::quant {

namespace {

void put_f16(uint8_t* p, float v) {
  const uint16_t h = float_to_f16(v);
  std::memcpy(p, &h, 2);
}

// Q8_0: 32 values, d = max|x| / 127 as f16, q = round(x / d) half away from zero.
void q8_0(const float* x, uint8_t* out) {
  float amax = 0;
  for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[i]));
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  put_f16(out, d);
  for (int i = 0; i < 32; ++i) out[2 + i] = static_cast<uint8_t>(static_cast<int8_t>(std::roundf(x[i] * id)));
}

// Q4_0: 32 values, d = (the value of largest magnitude) / -8 as f16, q = trunc(x / d + 8.5) in 0..15;
// the first 16 values in the low nibbles, the last 16 in the high ones.
void q4_0(const float* x, uint8_t* out) {
  float amax = 0, max = 0;
  for (int i = 0; i < 32; ++i)
    if (std::fabs(x[i]) > amax) amax = std::fabs(x[i]), max = x[i];
  const float d = max / -8.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  put_f16(out, d);
  auto q = [&](float v) { return static_cast<uint8_t>(std::min(15, static_cast<int>(std::trunc(v * id + 8.5f)))); };
  for (int i = 0; i < 16; ++i) out[2 + i] = static_cast<uint8_t>(q(x[i]) | (q(x[16 + i]) << 4));
}

int nearest(float v) { return static_cast<int>(std::lround(v)); }

// Q4_K: 256 values in 8 sub-blocks of 32, each x = d * sc * q - dmin * m with
// q in 0..15 and 6-bit sc, m; d and dmin f16. Layout: d, dmin, 12 bytes of
// packed scales and mins, 128 bytes of nibbles (sub-blocks 2j and 2j+1 share
// 32 bytes: low nibbles then high).
void q4_k(const float* x, uint8_t* out) {
  float scale[8], min[8];  // per sub-block: x ~ scale * q - min, min >= 0
  float max_scale = 0, max_min = 0;
  for (int j = 0; j < 8; ++j) {
    float lo = x[32 * j], hi = x[32 * j];
    for (int i = 1; i < 32; ++i) lo = std::min(lo, x[32 * j + i]), hi = std::max(hi, x[32 * j + i]);
    lo = std::min(lo, 0.0f);  // the offset only ever lowers the range (m >= 0)
    scale[j] = (hi - lo) / 15.0f;
    min[j] = -lo;
    max_scale = std::max(max_scale, scale[j]);
    max_min = std::max(max_min, min[j]);
  }
  const float d = max_scale / 63.0f, dmin = max_min / 63.0f;
  const float dq = f16_to_float(float_to_f16(d)), dminq = f16_to_float(float_to_f16(dmin));
  uint8_t ls[8], lm[8];
  for (int j = 0; j < 8; ++j) {
    // Round the scale up so the sub-block's range still fits in 0..15.
    ls[j] = dq > 0 ? static_cast<uint8_t>(std::clamp(static_cast<int>(std::ceil(scale[j] / dq - 1e-4f)), 0, 63)) : 0;
    lm[j] = dminq > 0 ? static_cast<uint8_t>(std::clamp(nearest(min[j] / dminq), 0, 63)) : 0;
  }
  put_f16(out, d);
  put_f16(out + 2, dmin);
  uint8_t* sc = out + 4;
  std::memset(sc, 0, 12);
  for (int j = 0; j < 8; ++j) {
    if (j < 4) {
      sc[j] = ls[j];
      sc[j + 4] = lm[j];
    } else {
      sc[j + 4] = static_cast<uint8_t>((ls[j] & 0xF) | ((lm[j] & 0xF) << 4));
      sc[j - 4] |= static_cast<uint8_t>((ls[j] >> 4) << 6);
      sc[j] |= static_cast<uint8_t>((lm[j] >> 4) << 6);
    }
  }
  uint8_t q[256];
  for (int j = 0; j < 8; ++j) {
    const float s = dq * ls[j], m = dminq * lm[j];
    for (int i = 0; i < 32; ++i)
      q[32 * j + i] = s > 0 ? static_cast<uint8_t>(std::clamp(nearest((x[32 * j + i] + m) / s), 0, 15)) : 0;
  }
  uint8_t* qs = out + 16;
  for (int j = 0; j < 256; j += 64)
    for (int l = 0; l < 32; ++l) qs[j / 2 + l] = static_cast<uint8_t>(q[j + l] | (q[j + l + 32] << 4));
}

// Q6_K: 256 values in 16 sub-blocks of 16, x = d * sc * q with q in -32..31
// and int8 sc; d f16. Layout: 128 bytes of low nibbles, 64 of high bit
// pairs, 16 scales, d.
void q6_k(const float* x, uint8_t* out) {
  float scale[16];
  float max_scale = 0, max_abs_scale = 0;
  for (int j = 0; j < 16; ++j) {
    float amax = 0, max = 0;
    for (int i = 0; i < 16; ++i)
      if (std::fabs(x[16 * j + i]) > amax) amax = std::fabs(x[16 * j + i]), max = x[16 * j + i];
    scale[j] = max / -32.0f;  // the extreme value lands on -32, the end with room
    if (std::fabs(scale[j]) > max_abs_scale) max_abs_scale = std::fabs(scale[j]), max_scale = scale[j];
  }
  uint8_t* ql = out;
  uint8_t* qh = out + 128;
  auto* sc = reinterpret_cast<int8_t*>(out + 192);
  if (max_abs_scale == 0) {
    std::memset(out, 0, 210);
    for (int i = 0; i < 64; ++i) qh[i] = 0xAA;  // every q = 32 (zero): high bits 10 in each pair
    put_f16(out + 208, 0.0f);
    return;
  }
  const float iscale = -128.0f / max_scale;
  const float d = 1.0f / iscale;
  const float dq = f16_to_float(float_to_f16(d));
  for (int j = 0; j < 16; ++j) sc[j] = static_cast<int8_t>(std::clamp(nearest(iscale * scale[j]), -128, 127));
  uint8_t L[256];
  for (int j = 0; j < 16; ++j) {
    const float s = dq * sc[j];
    for (int i = 0; i < 16; ++i)
      L[16 * j + i] = static_cast<uint8_t>(s != 0 ? std::clamp(nearest(x[16 * j + i] / s), -32, 31) + 32 : 32);
  }
  for (int j = 0; j < 256; j += 128) {
    for (int l = 0; l < 32; ++l) {
      const uint8_t q1 = L[j + l] & 0xF, q2 = L[j + l + 32] & 0xF, q3 = L[j + l + 64] & 0xF, q4 = L[j + l + 96] & 0xF;
      ql[l] = static_cast<uint8_t>(q1 | (q3 << 4));
      ql[l + 32] = static_cast<uint8_t>(q2 | (q4 << 4));
      qh[l] = static_cast<uint8_t>((L[j + l] >> 4) | ((L[j + l + 32] >> 4) << 2) | ((L[j + l + 64] >> 4) << 4) |
                                   ((L[j + l + 96] >> 4) << 6));
    }
    ql += 64;
    qh += 32;
  }
  put_f16(out + 208, d);
}

}  // namespace

bool gguf_quantizable(GgmlType t) {
  switch (t) {
    case GgmlType::F32: case GgmlType::F16: case GgmlType::BF16: case GgmlType::Q8_0: case GgmlType::Q4_0:
    case GgmlType::Q4_K: case GgmlType::Q6_K:
      return true;
    default:
      return false;
  }
}

std::string quantize_gguf(GgmlType t, const float* x, int64_t rows, int64_t cols) {
  int64_t be = 0, bb = 0;
  if (!gguf_quantizable(t) || !ggml_block_layout(t, &be, &bb))
    throw Error("lily does not write " + ggml_type_name(t) + " blocks");
  if (cols % be != 0)
    throw Error("rows of " + std::to_string(cols) + " do not split into " + ggml_type_name(t) + " blocks of " +
                std::to_string(be));
  const int64_t blocks = rows * (cols / be);
  std::string out(static_cast<size_t>(blocks * bb), '\0');
  auto* o = reinterpret_cast<uint8_t*>(out.data());
  for (int64_t b = 0; b < blocks; ++b) {
    const float* in = x + b * be;
    uint8_t* dst = o + b * bb;
    switch (t) {
      case GgmlType::F32: std::memcpy(dst, in, 4); break;
      case GgmlType::F16: put_f16(dst, *in); break;
      case GgmlType::BF16: { const uint16_t h = float_to_bf16(*in); std::memcpy(dst, &h, 2); break; }
      case GgmlType::Q8_0: q8_0(in, dst); break;
      case GgmlType::Q4_0: q4_0(in, dst); break;
      case GgmlType::Q4_K: q4_k(in, dst); break;
      case GgmlType::Q6_K: q6_k(in, dst); break;
      default: break;
    }
  }
  return out;
}

}  // namespace lily::quant
