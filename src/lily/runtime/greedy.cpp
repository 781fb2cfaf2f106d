#include "lily/runtime/greedy.h"

#include <algorithm>

namespace lily {

int32_t argmax(std::span<const float> v) {
  return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

std::vector<int32_t> generate_greedy(Qwen35MoeForward& fwd, SequenceState& state, std::span<const int32_t> prompt,
                                     const GreedyOptions& opt) {
  std::vector<int32_t> out;
  if (opt.max_tokens <= 0) return out;
  std::vector<float> logits = fwd.forward(prompt, state, LogitsFor::LastPosition);
  while (true) {
    const int32_t next = argmax(logits);
    out.push_back(next);
    const bool stop = std::find(opt.stop_ids.begin(), opt.stop_ids.end(), next) != opt.stop_ids.end();
    if (stop || static_cast<int64_t>(out.size()) >= opt.max_tokens) break;
    logits = fwd.forward(std::span<const int32_t>(&out.back(), 1), state, LogitsFor::LastPosition);
  }
  return out;
}

}  // namespace lily
