// Turns logits into the next token: logit bias, repetition / presence /
// frequency penalties, temperature, top-k, top-p, min-p, then a draw from a
// seeded generator (or the argmax when temperature is 0), so runs with the
// same seed are reproducible. The choice itself is a TokenPick (backend.h):
// made here on host logits, or by the backend where the logits are.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "lily/backend/backend.h"

namespace lily {

struct SamplingParams {
  double temperature = 1.0;  // 0 = greedy
  int64_t top_k = 0;         // 0 = off
  double top_p = 1.0;
  double min_p = 0.0;
  double presence_penalty = 0.0;
  double frequency_penalty = 0.0;
  double repetition_penalty = 1.0;
  std::map<int32_t, float> logit_bias;
  std::optional<uint64_t> seed;

  // Defaults from a model's generation_config.json (missing file: these defaults).
  // Throws lily::Error naming the file for a value of the wrong type or out of range.
  static SamplingParams from_generation_config(const std::string& model_dir);
  static constexpr size_t kMaxGenerationConfigBytes = size_t(1) << 20;
  // Throws lily::Error naming the first parameter out of range.
  void validate() const;
};

class Sampler {
 public:
  explicit Sampler(SamplingParams p);

  // Tokens that count for the repetition penalty (the prompt) before generation starts.
  void set_context(std::span<const int32_t> tokens);
  // The next choice: this sampler's adjustments (bias, penalties over what it
  // has seen) and a fresh uniform draw. Follow it with record().
  TokenPick plan(int64_t vocab);
  // The token chosen (here or by a backend), for the penalties that follow.
  void record(int32_t token);
  // Picks a token from `logits` (modified in place) and records it.
  int32_t sample(std::vector<float>& logits);
  // The same, among the tokens `allowed` accepts (constrained output): a
  // refused token is struck out and the draw repeated, which draws from the
  // distribution restricted to the allowed tokens. -1 when none is allowed.
  int32_t sample(std::vector<float>& logits, const std::function<bool(int32_t)>& allowed);

  const SamplingParams& params() const { return p_; }

 private:
  SamplingParams p_;
  std::mt19937_64 rng_;
  std::unordered_map<int32_t, int32_t> generated_counts_;
  std::vector<int32_t> seen_;  // prompt and generated tokens, for the repetition penalty
  std::vector<char> seen_mask_;
};

}  // namespace lily
