// Greedy decoding over one sequence: the argmax of each step's logits is fed back.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "lily/model/qwen35moe.h"

namespace lily {

// Index of the largest value; the first one on ties, as torch.argmax.
int32_t argmax(std::span<const float> v);

struct GreedyOptions {
  int64_t max_tokens = 16;
  std::vector<int64_t> stop_ids;  // generation ends after emitting one of these
};

// Prefills `prompt` into `state` and returns the generated ids.
std::vector<int32_t> generate_greedy(Qwen35MoeForward& fwd, SequenceState& state, std::span<const int32_t> prompt,
                                     const GreedyOptions& opt);

}  // namespace lily
