// Tokenizer throughput on mixed text (prose in several scripts, code, emoji),
// reported as bytes per second of input.
#include <benchmark/benchmark.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "lily/text/tokenizer.h"

namespace {

std::string data_dir() { return LILY_BENCH_DATA_DIR; }

std::string mixed_text(size_t bytes) {
  std::ifstream in(data_dir() + "/tokenizer/suite.json");
  std::stringstream ss;
  ss << in.rdbuf();
  const auto suite = nlohmann::json::parse(ss.str());
  std::vector<std::string> texts;
  for (const auto& c : suite) texts.push_back(c["text"]);
  std::mt19937 rng(1);
  std::string out;
  while (out.size() < bytes) out += texts[rng() % texts.size()] + "\n";
  return out;
}

void BM_Encode(benchmark::State& state) {
  static auto tok = lily::Tokenizer::load(std::string(LILY_BENCH_TINY_MODEL_DIR) + "/tokenizer.json");
  const std::string text = mixed_text(static_cast<size_t>(state.range(0)));
  size_t tokens = 0;
  for (auto _ : state) {
    auto ids = tok->encode(text);
    tokens = ids.size();
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
  state.counters["tokens"] = static_cast<double>(tokens);
}
BENCHMARK(BM_Encode)->Arg(1 << 20)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
