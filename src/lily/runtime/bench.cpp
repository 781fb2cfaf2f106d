#include "lily/runtime/bench.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>

#include "lily/model/qwen35moe.h"

namespace lily {

using clock_type = std::chrono::steady_clock;

namespace {
template <class T>
T median(std::vector<T> v) {
  if (v.empty()) return T{};
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}
}  // namespace

nlohmann::json BenchResult::to_json() const {
  return {{"context", context},
          {"prefill", {{"wall_secs", prefill_seconds}, {"tok_s", prefill_tok_s()}, {"first_token_id", first_token}}},
          {"decode",
           {{"wall_secs", decode_seconds}, {"tok_s", decode_tok_s()}, {"steps", decode_steps},
            {"step_wall_secs", step_seconds}, {"token_digest", token_digest},
            {"step_device_operations", median(step_operations)},
            {"step_host_secs", median(step_host_seconds)}}}};
}

std::vector<int32_t> bench_prompt(int64_t length, int64_t vocab) {
  std::vector<int32_t> p(static_cast<size_t>(length));
  for (int64_t i = 0; i < length; ++i)
    p[i] = static_cast<int32_t>((static_cast<uint64_t>(i) * 2654435761ull % (1ull << 32)) % static_cast<uint64_t>(vocab));
  return p;
}

BenchResult run_bench(const Model& model, int64_t context, int64_t decode_steps, std::shared_ptr<Backend> backend) {
  const auto prompt = bench_prompt(context, model.config().vocab_size);
  Qwen35MoeForward fwd(model, std::move(backend));
  // greedy picks where the logits are, as `lily run` makes them: only the id crosses to the host
  const TokenPick greedy;
  {  // warm-up: the same shapes on a state that is thrown away
    SequenceState warm = fwd.new_state();
    int32_t t = fwd.forward_pick(prompt, warm, ForwardMode::Prompt, greedy);
    for (int i = 0; i < 2; ++i) t = fwd.forward_pick(std::span<const int32_t>(&t, 1), warm, ForwardMode::Decode, greedy);
  }
  BenchResult r;
  r.context = context;
  r.decode_steps = decode_steps;
  SequenceState state = fwd.new_state();
  const auto t0 = clock_type::now();
  int32_t tok = fwd.forward_pick(prompt, state, ForwardMode::Prompt, greedy);
  const auto t1 = clock_type::now();
  r.prefill_seconds = std::chrono::duration<double>(t1 - t0).count();
  r.first_token = tok;
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](int32_t id) {
    for (int k = 0; k < 4; ++k) h = (h ^ ((static_cast<uint32_t>(id) >> (8 * k)) & 0xff)) * 1099511628211ull;
  };
  mix(tok);
  fwd.backend().profile(true);
  for (int64_t i = 0; i < decode_steps; ++i) {
    const DeviceActivity a0 = fwd.backend().activity();
    const auto s0 = clock_type::now();
    tok = fwd.forward_pick(std::span<const int32_t>(&tok, 1), state, ForwardMode::Decode, greedy);
    const double wall = std::chrono::duration<double>(clock_type::now() - s0).count();
    const DeviceActivity a1 = fwd.backend().activity();
    r.step_seconds.push_back(wall);
    r.step_operations.push_back(a1.operations - a0.operations);
    r.step_host_seconds.push_back(wall - (a1.wait_seconds - a0.wait_seconds));
    mix(tok);
  }
  fwd.backend().profile(false);
  r.decode_seconds = std::chrono::duration<double>(clock_type::now() - t1).count();
  r.token_digest = h;
  return r;
}

}  // namespace lily
