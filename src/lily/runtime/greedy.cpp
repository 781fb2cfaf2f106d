#include "lily/runtime/greedy.h"

#include <algorithm>
#include <limits>

namespace lily {

int32_t argmax(std::span<const float> v) {
  // The largest value in a vector pass, then its first position: the same
  // answer as std::max_element, a few times faster over a 248k vocabulary.
  const float* p = v.data();
  const int64_t n = static_cast<int64_t>(v.size());
  float best = -std::numeric_limits<float>::infinity();
  int nans = 0;
#pragma omp simd reduction(max : best) reduction(+ : nans)
  for (int64_t i = 0; i < n; ++i) {
    best = std::max(best, p[i]);
    nans += p[i] != p[i];
  }
  if (nans == 0)
    for (int64_t i = 0; i < n; ++i)
      if (p[i] == best) return static_cast<int32_t>(i);
  return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());  // NaNs: max_element's own order
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
