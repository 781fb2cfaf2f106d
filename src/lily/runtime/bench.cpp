#include "lily/runtime/bench.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <optional>

#include "lily/model/qwen35moe.h"
#include "lily/runtime/greedy.h"

namespace lily {

using clock_type = std::chrono::steady_clock;

namespace {
template <class T>
T median(std::vector<T> v) {
  if (v.empty()) return T{};
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

// Greedy speculative decoding for `steps` tokens after `first`: drafts from
// the MTP head, one verify step over the token and its drafts, the longest
// run of drafts that the model's own picks confirm kept.
template <class Mix>
void run_speculation(Qwen35MoeForward& fwd, SequenceState& state, int32_t first, int64_t steps, int64_t k,
                     BenchResult::Speculation& out, const Mix& fnv) {
  fwd.keep_mtp(true);
  out.drafts = k;
  uint64_t h = 1469598103934665603ull;
  fnv(h, first);
  int32_t tok = first;
  const auto t0 = clock_type::now();
  while (out.tokens < steps) {
    const auto s0 = clock_type::now();
    std::vector<int32_t> rows = {tok};
    const std::vector<int32_t> drafts = fwd.draft(state, tok, k);
    rows.insert(rows.end(), drafts.begin(), drafts.end());
    const auto s1 = clock_type::now();
    Qwen35MoeForward::Undo undo;
    const std::vector<float> logits = fwd.verify(rows, state, undo);
    const size_t vocab = logits.size() / rows.size();
    int64_t keep = 0;
    for (size_t i = 0; i < rows.size() && out.tokens < steps; ++i) {
      tok = argmax(std::span<const float>(logits.data() + i * vocab, vocab));
      fnv(h, tok);
      ++out.tokens;
      keep = static_cast<int64_t>(i) + 1;
      if (i == drafts.size() || tok != drafts[i]) break;
      ++out.accepted;
    }
    fwd.rewind(state, undo, keep);
    out.draft_seconds.push_back(std::chrono::duration<double>(s1 - s0).count());
    out.verify_seconds.push_back(std::chrono::duration<double>(clock_type::now() - s1).count());
    ++out.steps;
  }
  out.seconds = std::chrono::duration<double>(clock_type::now() - t0).count();
  out.token_digest = h;
}

}  // namespace

nlohmann::json BenchResult::to_json() const {
  nlohmann::json j = {{"context", context},
          {"prefill", {{"wall_secs", prefill_seconds}, {"tok_s", prefill_tok_s()}, {"first_token_id", first_token}}},
          {"decode",
           {{"wall_secs", decode_seconds}, {"tok_s", decode_tok_s()}, {"steps", decode_steps},
            {"step_wall_secs", step_seconds}, {"token_digest", token_digest},
            {"step_device_operations", median(step_operations)},
            {"step_host_secs", median(step_host_seconds)}}}};
  if (mtp.drafts > 0)
    j["mtp"] = {{"drafts", mtp.drafts},
                {"verify_steps", mtp.steps},
                {"accepted_drafts", mtp.accepted},
                {"acceptance_rate", mtp.steps > 0 ? static_cast<double>(mtp.accepted) / (mtp.steps * mtp.drafts) : 0.0},
                {"tokens", mtp.tokens},
                {"tokens_per_step", mtp.steps > 0 ? static_cast<double>(mtp.tokens) / mtp.steps : 0.0},
                {"wall_secs", mtp.seconds},
                {"tok_s", mtp.tok_s()},
                {"token_digest", mtp.token_digest},
                {"draft_secs", median(mtp.draft_seconds)},
                {"verify_secs", median(mtp.verify_seconds)},
                {"plain_step_secs", median(step_seconds)}};
  return j;
}

std::vector<int32_t> bench_prompt(int64_t length, int64_t vocab) {
  std::vector<int32_t> p(static_cast<size_t>(length));
  for (int64_t i = 0; i < length; ++i)
    p[i] = static_cast<int32_t>((static_cast<uint64_t>(i) * 2654435761ull % (1ull << 32)) % static_cast<uint64_t>(vocab));
  return p;
}

BenchResult run_bench(const Model& model, int64_t context, int64_t decode_steps, std::shared_ptr<Backend> backend,
                      int64_t mtp) {
  const auto prompt = bench_prompt(context, model.config().vocab_size);
  Qwen35MoeForward fwd(model, std::move(backend));
  if (mtp > 0) fwd.keep_mtp(true);
  // greedy picks where the logits are, as `lily run` makes them: only the id crosses to the host
  const TokenPick greedy;
  {  // warm-up: the same shapes on a state that is thrown away
    SequenceState warm = fwd.new_state();
    int32_t t = fwd.forward_pick(prompt, warm, ForwardMode::Prompt, greedy);
    for (int i = 0; i < 2; ++i) t = fwd.forward_pick(std::span<const int32_t>(&t, 1), warm, ForwardMode::Decode, greedy);
    if (mtp > 0) {
      std::vector<int32_t> rows = {t};
      const auto d = fwd.draft(warm, t, mtp);
      rows.insert(rows.end(), d.begin(), d.end());
      Qwen35MoeForward::Undo undo;
      fwd.verify(rows, warm, undo);
    }
  }
  BenchResult r;
  r.context = context;
  r.decode_steps = decode_steps;
  SequenceState state = fwd.new_state();
  const auto t0 = clock_type::now();
  int32_t tok = fwd.forward_pick(prompt, state, ForwardMode::Prompt, greedy);
  r.prefill_seconds = std::chrono::duration<double>(clock_type::now() - t0).count();
  r.first_token = tok;
  const int32_t first = tok;
  // the speculative run starts from this state; the plain steps take a copy without the head
  std::optional<SequenceState> spec_state;
  if (mtp > 0) {
    spec_state = state;
    fwd.keep_mtp(false);
  }
  auto fnv = [](uint64_t& h, int32_t id) {
    for (int k = 0; k < 4; ++k) h = (h ^ ((static_cast<uint32_t>(id) >> (8 * k)) & 0xff)) * 1099511628211ull;
  };
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](int32_t id) { fnv(h, id); };
  mix(tok);
  const auto t1 = clock_type::now();
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
  if (mtp > 0) run_speculation(fwd, *spec_state, first, decode_steps, mtp, r.mtp, fnv);
  return r;
}

}  // namespace lily
