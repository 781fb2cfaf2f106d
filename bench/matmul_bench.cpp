// Matrix products of the real model's shapes on MLX 4-bit weights (group 64,
// BF16 scales and biases, as mlx-community checkpoints store them) and on
// GGUF block formats:
// decode (one input row; read bandwidth is the limit) and prompt pieces
// (many rows; arithmetic is the limit). Bytes/s is the weight bytes read.
#include <benchmark/benchmark.h>

#include <cstring>
#include <random>
#include <vector>

#include "lily/backend/cpu/int8_dot.h"
#include "lily/backend/cpu/matmul.h"
#include "lily/backend/cpu/thread_pool.h"
#include "lily/io/dtype.h"
#include "lily/io/gguf.h"
#include "lily/quant/affine.h"

namespace {

using namespace lily;

struct QuantMatrix {
  quant::QuantizedRows q;
  std::vector<uint16_t> scales, biases;
  Matrix m;
  QuantMatrix(int64_t R, int64_t C, int bits = 4, int gs = 64) {
    std::mt19937 rng(1);
    std::normal_distribution<float> n(0.f, 0.02f);
    std::vector<float> w(static_cast<size_t>(R * C));
    for (auto& a : w) a = n(rng);
    q = quant::quantize(w.data(), R, C, bits, gs);
    for (float s : q.scales) scales.push_back(float_to_bf16(s));
    for (float b : q.biases) biases.push_back(float_to_bf16(b));
    m = Matrix{DType::U32, q.packed.data(), R, C};
    m.bits = bits;
    m.group_size = gs;
    m.scale_dtype = DType::BF16;
    m.scales = scales.data();
    m.biases = biases.data();
  }
};

// Two threads at the best ISA this CPU has; int8 activations when asked for.
// Null (and the benchmark skipped) where the CPU has no int8 kernel.
std::unique_ptr<cpu::CpuContext> context(benchmark::State& state, bool int8) {
  cpu::CpuOptions o;
  o.threads = 2;
  o.int8 = int8 ? cpu::CpuOptions::Int8::On : cpu::CpuOptions::Int8::Off;
  try {
    return std::make_unique<cpu::CpuContext>(cpu::make_cpu_context(o));
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return nullptr;
  }
}

void BM_Decode4bit(benchmark::State& state) {
  const int64_t R = state.range(0), C = state.range(1);
  // third argument 1: the int8-activation path
  const auto ctx = context(state, state.range(2) == 1);
  if (!ctx) return;
  static QuantMatrix* w = nullptr;  // built once per shape (large)
  static int64_t shape = -1;
  if (shape != R * 100000 + C) {
    delete w;
    w = new QuantMatrix(R, C);
    shape = R * 100000 + C;
  }
  std::vector<float> x(static_cast<size_t>(C), 0.5f), y(static_cast<size_t>(R));
  for (auto _ : state) {
    cpu::matmul(*ctx, x.data(), 1, w->m, y.data(), cpu::Rows::Tokens);
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(w->m.bytes()));
}
// lm_head slice (248320 rows in the model), GDN qkv projection, an expert's gate
BENCHMARK(BM_Decode4bit)
    ->Args({65536, 2048, 0})
    ->Args({8192, 2048, 0})
    ->Args({512, 2048, 0})
    ->Args({65536, 2048, 1})
    ->Args({8192, 2048, 1})
    ->Args({512, 2048, 1})
    ->UseRealTime();

// R x C weights of a GGUF block format: random codes, every super-block's
// (or block's) f16 scales set to 0.01 so the products stay finite.
struct GgufMatrix {
  std::vector<uint8_t> bytes;
  Matrix m;
  GgufMatrix(int64_t R, int64_t C, GgmlType type) {
    int64_t elems = 0, block = 0;
    ggml_block_layout(type, &elems, &block);
    bytes.resize(static_cast<size_t>(R * C / elems * block));
    std::mt19937 rng(1);
    for (auto& b : bytes) b = static_cast<uint8_t>(rng());
    // where the f16 d lies (and dmin beside it for Q2_K, Q4_K and Q5_K)
    const int scale_at = type == GgmlType::Q6_K ? 208 : type == GgmlType::Q3_K ? 108 : type == GgmlType::Q2_K ? 80 : 0;
    const bool dmin = type == GgmlType::Q2_K || type == GgmlType::Q4_K || type == GgmlType::Q5_K;
    for (size_t k = 0; k < bytes.size(); k += static_cast<size_t>(block)) {
      const uint16_t h = float_to_f16(0.01f);
      std::memcpy(&bytes[k + scale_at], &h, 2);
      if (dmin) std::memcpy(&bytes[k + scale_at + 2], &h, 2);
    }
    m = Matrix{DType::U8, bytes.data(), R, C};
    m.ggml_type = static_cast<int>(type);
  }
};

// GGUF block formats on the int8 decode path, read where they lie. Third
// argument: the ggml type number (2 Q4_0, 8 Q8_0, 10 Q2_K, 11 Q3_K, 12 Q4_K,
// 13 Q5_K, 14 Q6_K, 23 IQ4_XS); a fourth, 0, takes the float path instead.
void BM_DecodeGguf(benchmark::State& state) {
  const int64_t R = state.range(0), C = state.range(1);
  const auto ctx = context(state, state.range(3) != 0);
  if (!ctx) return;
  const GgufMatrix w(R, C, static_cast<GgmlType>(state.range(2)));
  std::vector<float> x(static_cast<size_t>(C), 0.5f), y(static_cast<size_t>(R));
  for (auto _ : state) {
    cpu::matmul(*ctx, x.data(), 1, w.m, y.data(), cpu::Rows::Tokens);
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(w.bytes.size()));
}
BENCHMARK(BM_DecodeGguf)
    ->Args({65536, 2048, 12, 1})
    ->Args({65536, 2048, 14, 1})
    ->Args({65536, 2048, 13, 1})
    ->Args({65536, 2048, 8, 1})
    ->Args({65536, 2048, 2, 1})
    ->Args({65536, 2048, 10, 1})
    ->Args({65536, 2048, 11, 1})
    ->Args({65536, 2048, 23, 1})
    ->Args({65536, 2048, 10, 0})
    ->Args({65536, 2048, 11, 0})
    ->Args({65536, 2048, 23, 0})
    ->Args({512, 2048, 12, 1})
    ->Args({4096, 2048, 12, 1})  // a few MB, from the last-level cache: the kernels' own rate
    ->Args({4096, 2048, 14, 1})
    ->UseRealTime();

// What a plain read of the same bytes costs: the roofline of the decode products.
void BM_ReadBytes(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0)) / sizeof(uint64_t);
  std::vector<uint64_t> buf(n, 1);
  uint64_t sink = 0;
  const auto ctx = context(state, false);
  for (auto _ : state) {
    std::vector<uint64_t> part(64, 0);
    ctx->threads().parallel_for(static_cast<int64_t>(n), 1 << 16, [&](int64_t b, int64_t e) {
      uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
      for (int64_t i = b; i + 4 <= e; i += 4) a0 += buf[i], a1 += buf[i + 1], a2 += buf[i + 2], a3 += buf[i + 3];
      part[(b * 8 / static_cast<int64_t>(n)) * 8] = a0 ^ a1 ^ a2 ^ a3;
    });
    for (uint64_t p : part) sink += p;
  }
  benchmark::DoNotOptimize(sink);
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * n * sizeof(uint64_t)));
}
BENCHMARK(BM_ReadBytes)->Arg(72 << 20)->Arg(9 << 20)->UseRealTime();

// The timed loop of a prompt benchmark: T tokens of fixed inputs in [-1, 1) against W.
void run_prompt(benchmark::State& state, const cpu::CpuContext& ctx, int64_t T, const Matrix& W) {
  std::vector<float> x(static_cast<size_t>(T * W.cols)), y(static_cast<size_t>(T * W.rows));
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 2654435761u) % 1000) / 500.f - 1.f;
  for (auto _ : state) {
    cpu::matmul(ctx, x.data(), T, W, y.data(), cpu::Rows::Prompt);
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * T * W.rows * W.cols * state.iterations(), benchmark::Counter::kIsRate);
}

// Prompt products: T tokens against R x 2048 weights; third argument 1: int8
// inputs (AMX tiles where the CPU has them). 512 rows and 16 tokens is an
// expert's share of a 512-token prompt.
void BM_Prompt4bit(benchmark::State& state) {
  const int64_t T = state.range(0), R = state.range(1), C = 2048;
  const auto ctx = context(state, state.range(2) == 1);
  if (!ctx) return;
  const QuantMatrix w(R, C);
  run_prompt(state, *ctx, T, w.m);
}
BENCHMARK(BM_Prompt4bit)
    ->Args({16, 2048, 0})
    ->Args({512, 2048, 0})
    ->Args({16, 512, 0})
    ->Args({16, 2048, 1})
    ->Args({64, 2048, 1})
    ->Args({512, 2048, 1})
    ->Args({16, 512, 1})
    ->UseRealTime();

// GGUF prompt products: T tokens against R x 2048 weights of type (third
// argument, ggml's number: 12 Q4_K, 14 Q6_K, 2 Q4_0, 8 Q8_0); fourth
// argument 1: int8 inputs.
void BM_PromptGguf(benchmark::State& state) {
  const int64_t T = state.range(0), R = state.range(1), C = 2048;
  const auto ctx = context(state, state.range(3) == 1);
  if (!ctx) return;
  const GgufMatrix w(R, C, static_cast<GgmlType>(state.range(2)));
  run_prompt(state, *ctx, T, w.m);
}
BENCHMARK(BM_PromptGguf)
    ->Args({16, 512, 12, 0})
    ->Args({16, 512, 12, 1})
    ->Args({16, 512, 14, 1})
    ->Args({16, 512, 2, 1})
    ->Args({16, 512, 8, 1})
    ->Args({512, 2048, 12, 1})
    ->Args({512, 2048, 14, 1})
    ->UseRealTime();

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  return 0;
}
