#include "lily/backend/cpu/matmul.h"

#include <algorithm>
#include <vector>

#include "lily/backend/cpu/amx_matmul.h"
#include "lily/backend/cpu/ggml_int8_dot.h"
#include "lily/backend/cpu/ggml_int8_tile.h"
#include "lily/backend/cpu/int8_dot.h"
#include "lily/backend/cpu/int8_tile.h"
#include "lily/backend/cpu/kernels.h"
#include "lily/backend/cpu/thread_pool.h"

namespace lily::cpu {

namespace {
inline float plain_dot(const float* a, const float* b, int64_t n) {
  float s = 0.f;
  for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

// Row r of W as floats: a pointer into W itself when it is F32, else converted into buf.
// Quantized rows are dequantized after their scales, so buf holds cols + 2 * groups floats.
const float* row_floats(Isa isa, const Matrix& W, int64_t r, float* buf) {
  if (!W.quantized() && W.dtype == DType::F32) return static_cast<const float*>(W.row(r));
  if (W.quantized()) {
    const int64_t groups = W.cols / W.group_size;
    float *s = buf + W.cols, *b = s + groups;
    scales_to_float(isa, W, r, s, b);
    kernels::dequantize_row(isa, static_cast<const uint8_t*>(W.row(r)), s, b, W.cols, W.bits, W.group_size, buf);
  } else if (W.dtype == DType::BF16) {
    kernels::bf16_to_f32(isa, static_cast<const uint16_t*>(W.row(r)), buf, W.cols);
  } else {
    W.row_to_float(r, buf);
  }
  return buf;
}

// Floats row_floats needs for one row of W.
int64_t row_buffer(const Matrix& W) { return W.cols + (W.quantized() ? 2 * (W.cols / W.group_size) : 0); }


// Rows r0 .. r0+n-1 (n <= 4; a short block repeats its last row) of a
// quantized matrix with their scales and biases converted into `sb` [8, groups].
kernels::QuantRows row_block(Isa isa, const Matrix& W, int64_t r0, int64_t n, int64_t groups, float* sb) {
  kernels::QuantRows w{{}, {}, {}, groups, W.group_size, W.bits};
  for (int64_t i = 0; i < 4; ++i) {
    if (i < n) scales_to_float(isa, W, r0 + i, sb + 2 * i * groups, sb + (2 * i + 1) * groups);
    const int64_t k = std::min(i, n - 1);
    w.q[i] = static_cast<const uint8_t*>(W.row(r0 + k));
    w.scales[i] = sb + 2 * k * groups;
    w.biases[i] = sb + (2 * k + 1) * groups;
  }
  return w;
}

// Rows are handed out in blocks large enough that waking a thread pays off.
int64_t row_grain(const Matrix& W, int64_t T) {
  const int64_t work_per_row = W.cols * std::max<int64_t>(T, 1);
  return std::max<int64_t>(8, (1 << 16) / std::max<int64_t>(work_per_row, 1));
}
}  // namespace

void scales_to_float(Isa isa, const Matrix& W, int64_t r, float* s, float* b) {
  const int64_t groups = W.cols / W.group_size;
  const size_t off = static_cast<size_t>(r * groups) * dtype_size(W.scale_dtype);
  if (W.scale_dtype == DType::BF16) {
    kernels::bf16_to_f32(isa, reinterpret_cast<const uint16_t*>(static_cast<const uint8_t*>(W.scales) + off), s, groups);
    kernels::bf16_to_f32(isa, reinterpret_cast<const uint16_t*>(static_cast<const uint8_t*>(W.biases) + off), b, groups);
    return;
  }
  convert_to_float(W.scale_dtype, static_cast<const uint8_t*>(W.scales) + off, s, static_cast<size_t>(groups));
  convert_to_float(W.scale_dtype, static_cast<const uint8_t*>(W.biases) + off, b, static_cast<size_t>(groups));
}

void matmul_reference(const float* x, int64_t T, const Matrix& W, float* y) {
  const int64_t R = W.rows, C = W.cols;
  std::vector<float> row(static_cast<size_t>(C));
  for (int64_t r = 0; r < R; ++r) {
    W.row_to_float(r, row.data());
    for (int64_t t = 0; t < T; ++t) y[t * R + r] = plain_dot(row.data(), x + t * C, C);
  }
}

namespace {
// Packed products: decode products of 4- and 8-bit rows read the packed bytes once,
// dequantizing inside the dot; with int8 activations each token's input is
// rounded once and met by byte dot products instead. GGUF block formats take
// this path with int8 activations only (else each row is decoded to floats).
// Prompts take it with int8 activations too, where no AMX tile does them:
// a block of four rows stays in L1 while every token meets it, which beats
// converting the rows to floats for the float tiles.
bool packed_product(const CpuContext& ctx, const Matrix& W, Rows kind) {
  if (W.ggml_blocks()) return ctx.int8 && ggml_int8::has_kernel(int8::kernel_for(ctx.isa)) && ggml_int8::supports(W);
  if (kind == Rows::Prompt) return ctx.int8 && int8::supports(W);
  return W.quantized() && (W.bits == 4 || W.bits == 8);
}

// What a packed product needs of its T inputs, worked out once per call.
struct PackedInput {
  Isa isa = Isa::Portable;
  int8::Kernel kernel = int8::Kernel::None;  // None: the float path
  bool use_int8 = false;
  bool ggml = false;                    // a GGUF block format (int8 always)
  bool tiles = false;                   // a prompt in int8 tiles of rows (int8_tile.h, ggml_int8_tile.h)
  std::vector<int8::Input> ins;         // int8: one per token
  std::vector<ggml_int8::Input> gins;   // GGUF blocks: one per token
  std::vector<float> xsum, xeo;  // float: group sums and even/odd halves
  kernels::QuantInputs in;
};

void prepare(const CpuContext& ctx, const float* x, int64_t T, const Matrix& W, Rows kind, PackedInput& p) {
  p.isa = ctx.isa;
  if (W.ggml_blocks()) {
    p.ggml = p.use_int8 = true;
    p.kernel = int8::kernel_for(ctx.isa);
    p.tiles = kind == Rows::Prompt && ggml_int8::tile_supported(p.kernel, W);
    p.gins.resize(static_cast<size_t>(T));
    const auto type = static_cast<GgmlType>(W.ggml_type);
    ctx.threads().parallel_for(T, 16, [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t) p.gins[t] = ggml_int8::quantize_input(ctx.isa, type, x + t * W.cols, W.cols);
    });
    return;
  }
  const int64_t C = W.cols, gs = W.group_size, groups = C / gs;
  p.use_int8 = ctx.int8 && int8::supports(W);
  if (p.use_int8) {
    p.kernel = int8::kernel_for(ctx.isa);
    p.tiles = kind == Rows::Prompt && int8::tile_supported(p.kernel, W);
    p.ins.resize(static_cast<size_t>(T));  // a prompt's inputs are rounded on every thread
    ctx.threads().parallel_for(T, 16, [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t) p.ins[t] = int8::quantize_input(ctx.isa, x + t * C, C, static_cast<int>(gs), W.bits == 4);
    });
    return;
  }
  p.xsum.resize(static_cast<size_t>(T * groups));
  if (W.bits == 4) p.xeo.resize(static_cast<size_t>(T * C));
  for (int64_t t = 0; t < T; ++t) {
    kernels::group_sums(ctx.isa, x + t * C, C, static_cast<int>(gs), p.xsum.data() + t * groups);
    if (W.bits == 4) kernels::deinterleave(ctx.isa, x + t * C, C, p.xeo.data() + t * C, p.xeo.data() + t * C + C / 2);
  }
  p.in.x = x;
  p.in.xe = W.bits == 4 ? p.xeo.data() : nullptr;  // the even/odd split is for 4-bit weights only
  p.in.xo = W.bits == 4 ? p.xeo.data() + C / 2 : nullptr;
  p.in.x_stride = C;
  p.in.xsum = p.xsum.data();
  p.in.xsum_stride = groups;
}

// Rows [b, e) of a packed product: four rows at a time, every token
// against each; a short last block repeats its last row.
void packed_rows(const PackedInput& p, int64_t T, const Matrix& W, float* y, int64_t b, int64_t e) {
  const int64_t R = W.rows, groups = p.ggml ? 0 : W.cols / W.group_size, row_bytes = static_cast<int64_t>(W.row_bytes());
  // scratch kept per thread: a decode step calls this for hundreds of small ranges
  thread_local std::vector<float> sb, out;
  if (!p.use_int8) sb.resize(static_cast<size_t>(8 * groups));
  out.resize(static_cast<size_t>(T * 4));
  for (int64_t r0 = b; r0 < e; r0 += 4) {
    const int64_t n = std::min<int64_t>(4, e - r0);
    if (p.use_int8) {
      // The hardware prefetcher stops at page boundaries, and with the byte
      // products fast enough to wait on memory that is what limits them: the
      // kernel asks for the rows six ahead, a line per row per step.
      // (Whole blocks ahead, a multiple of a page away, measured slower.)
      const int64_t ahead = r0 + 10 <= R ? 6 * row_bytes : 0;
      if (p.ggml)
        ggml_int8::dot_tile(p.kernel, W, r0, n, p.gins.data(), T, out.data(), ahead);
      else
        int8::dot_tile(p.kernel, W, r0, n, p.ins.data(), T, out.data(), ahead);
    } else {
      const kernels::QuantRows w = row_block(p.isa, W, r0, n, groups, sb.data());
      kernels::dot_q_rows(p.isa, w, p.in, T, out.data(), 4);
    }
    for (int64_t t = 0; t < T; ++t)
      for (int64_t i = 0; i < n; ++i) y[t * R + r0 + i] = out[t * 4 + i];
  }
}

// Rows [b, e) of any other product: a block of rows is converted to floats
// once and used for every input row.
void float_rows(Isa isa, const float* x, int64_t T, const Matrix& W, float* y, Rows rows_kind, int64_t b, int64_t e) {
  const int64_t R = W.rows, C = W.cols, RB = row_buffer(W);
  constexpr int64_t kBlock = 16;
  std::vector<float> buf(static_cast<size_t>(kBlock * RB));
  const float* rows[kBlock];
  for (int64_t r0 = b; r0 < e; r0 += kBlock) {
    const int64_t n = std::min(kBlock, e - r0);
    for (int64_t i = 0; i < n; ++i) rows[i] = row_floats(isa, W, r0 + i, buf.data() + i * RB);
    for (int64_t i = n; i < kBlock; ++i) rows[i] = rows[n - 1];  // pad a short block
    if (rows_kind == Rows::Tokens) {  // decode: plain dots, no tile padding
      for (int64_t t = 0; t < T; ++t)
        for (int64_t i = 0; i < n; ++i) y[t * R + r0 + i] = kernels::dot(isa, rows[i], x + t * C, C);
      continue;
    }
    // Every output of a prompt comes out of a 4 x 4 tile (short edges padded by
    // repetition), so a row's result does not depend on how many inputs share the call.
    for (int64_t t = 0; t < T; t += 4) {
      const int64_t nt = std::min<int64_t>(4, T - t);
      const float* xs[4];
      for (int64_t j = 0; j < 4; ++j) xs[j] = x + (t + std::min(j, nt - 1)) * C;
      for (int64_t i = 0; i < n; i += 4) {
        float tile[4][4];
        kernels::dot4x4(isa, rows + i, xs, C, tile);
        for (int64_t a = 0; a < std::min<int64_t>(4, n - i); ++a)
          for (int64_t j = 0; j < nt; ++j) y[(t + j) * R + r0 + i + a] = tile[a][j];
      }
    }
  }
}
}  // namespace

void matmul(const CpuContext& ctx, const float* x, int64_t T, const Matrix& W, float* y, Rows rows_kind) {
  ThreadPool& pool = ctx.threads();
  const int64_t R = W.rows, grain = row_grain(W, T);
  if (rows_kind == Rows::Prompt && ctx.amx() && amx::supports(W)) {
    amx::matmul(ctx, x, T, W, y);
    return;
  }
  if (packed_product(ctx, W, rows_kind)) {
    PackedInput p;
    prepare(ctx, x, T, W, rows_kind, p);
    if (p.tiles) {  // whole tiles to each thread
      const int64_t rows = p.ggml ? ggml_int8::kTileRows : int8::kTileRows;
      pool.parallel_for((R + rows - 1) / rows, (grain + rows - 1) / rows, [&](int64_t b, int64_t e) {
        for (int64_t r0 = b * rows; r0 < std::min(e * rows, R); r0 += rows) {
          const int64_t n = std::min(rows, R - r0);
          if (p.ggml)
            ggml_int8::tile_rows(p.kernel, W, r0, n, p.gins.data(), T, y, R);
          else
            int8::tile_rows(p.kernel, W, r0, n, p.ins.data(), T, y, R);
        }
      });
      return;
    }
    pool.parallel_for(R, grain, [&](int64_t b, int64_t e) { packed_rows(p, T, W, y, b, e); });
    return;
  }
  pool.parallel_for(R, grain, [&](int64_t b, int64_t e) { float_rows(ctx.isa, x, T, W, y, rows_kind, b, e); });
}

void matmul_batch(const CpuContext& ctx, std::span<const Product> products, int64_t T, Rows rows_kind) {
  if (rows_kind != Rows::Tokens) {  // prompts: each product is large enough to split alone
    for (const Product& p : products) matmul(ctx, p.x, T, *p.W, p.y, rows_kind);
    return;
  }
  // Decode: the rows of all the products form one range (each product's
  // rounded up to four, so a block never spans two) split in one parallel loop.
  const size_t n = products.size();
  std::vector<PackedInput> inputs(n);
  std::vector<size_t> input_of(n);  // products of one input in one format share its preparation
  std::vector<int64_t> start(n + 1, 0);
  int64_t grain = 8;
  auto same_input = [&](size_t a, size_t b) {
    const Matrix &A = *products[a].W, &B = *products[b].W;
    return products[a].x == products[b].x && A.cols == B.cols && A.bits == B.bits && A.group_size == B.group_size &&
           A.ggml_blocks() == B.ggml_blocks() && int8::supports(A) == int8::supports(B);
  };
  for (size_t i = 0; i < n; ++i) {
    const Matrix& W = *products[i].W;
    input_of[i] = i;
    for (size_t j = 0; j < i && input_of[i] == i; ++j)
      if (packed_product(ctx, *products[j].W, rows_kind) && same_input(i, j)) input_of[i] = input_of[j];
    if (packed_product(ctx, W, rows_kind) && input_of[i] == i) prepare(ctx, products[i].x, T, W, rows_kind, inputs[i]);
    start[i + 1] = start[i] + (W.rows + 3) / 4 * 4;
    grain = std::max(grain, row_grain(W, T));
  }
  ctx.threads().parallel_for(start[n], grain, [&](int64_t b, int64_t e) {
    for (size_t i = 0; i < n; ++i) {
      const Product& p = products[i];
      const int64_t lo = std::max(b, start[i]) - start[i], hi = std::min(e, start[i + 1]) - start[i];
      const int64_t end = std::min(hi, p.W->rows);
      if (lo >= end) continue;
      if (packed_product(ctx, *p.W, rows_kind))
        packed_rows(inputs[input_of[i]], T, *p.W, p.y, lo, end);
      else
        float_rows(ctx.isa, p.x, T, *p.W, p.y, rows_kind, lo, end);
    }
  });
}

float dot_row(Isa isa, const Matrix& W, int64_t r, const float* x) {
  std::vector<float> row(static_cast<size_t>(row_buffer(W)));
  return kernels::dot(isa, row_floats(isa, W, r, row.data()), x, W.cols);
}

void gather_rows(Isa isa, const Matrix& W, const int32_t* ids, int64_t n, float* out) {
  std::vector<float> buf(static_cast<size_t>(row_buffer(W)));
  for (int64_t i = 0; i < n; ++i) {
    const float* row = row_floats(isa, W, ids[i], buf.data());
    std::copy(row, row + W.cols, out + i * W.cols);
  }
}

}  // namespace lily::cpu
