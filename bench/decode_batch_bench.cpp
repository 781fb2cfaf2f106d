// Decode steps for 1 to 16 sequences at once on a real-shape checkpoint
// (LILY_BENCH_MODEL, e.g. one written by `lily synth`): what continuous
// batching gains per step. Tokens/s counts every sequence's token.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <memory>

#include "lily/backend/cpu/cpu_backend.h"
#include "lily/model/qwen35moe.h"

namespace {

using namespace lily;

const Model& model() {
  static std::unique_ptr<Model> m = Model::load(std::getenv("LILY_BENCH_MODEL"));
  return *m;
}

void BM_DecodeBatch(benchmark::State& state) {
  const int64_t n = state.range(0);
  cpu::CpuOptions o;
  o.threads = 2;
  Qwen35MoeForward fwd(model(), std::make_shared<cpu::CpuBackend>(cpu::make_cpu_context(o)));
  std::vector<SequenceState> seqs;
  std::vector<SequenceState*> ptrs;
  std::vector<int32_t> tokens;
  for (int64_t i = 0; i < n; ++i) seqs.push_back(fwd.new_state());
  for (int64_t i = 0; i < n; ++i) {
    const std::vector<int32_t> prompt = {static_cast<int32_t>(100 + i), 7, 9, static_cast<int32_t>(1000 + 3 * i)};
    fwd.forward(prompt, seqs[i], LogitsFor::LastPosition, ForwardMode::Prompt);
    ptrs.push_back(&seqs[i]);
    tokens.push_back(static_cast<int32_t>(500 + 11 * i));
  }
  for (auto _ : state) benchmark::DoNotOptimize(fwd.decode_batch(tokens, ptrs));
  state.counters["tok/s"] = benchmark::Counter(static_cast<double>(n * state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_DecodeBatch)->Arg(1)->Arg(4)->Arg(16)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

int main(int argc, char** argv) {
  if (!std::getenv("LILY_BENCH_MODEL")) {
    std::fprintf(stderr, "set LILY_BENCH_MODEL to a checkpoint directory (lily synth --out DIR --layers 4 --format mlx4)\n");
    return 2;
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  return 0;
}
