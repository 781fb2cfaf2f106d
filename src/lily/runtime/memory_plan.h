// What a model needs in memory for a given context, planned before any
// work starts: the mapped weights, the per-sequence GDN state, the KV cache
// and the activation scratch of a prefill. A request that does not fit the
// budget is refused with the numbers instead of swapping or crashing.
#pragma once

#include <cstdint>
#include <string>

#include "lily/model/model.h"

namespace lily {

struct MemoryPlan {
  size_t weights = 0;      // mapped from the checkpoint
  size_t gdn_state = 0;    // per sequence
  size_t kv_cache = 0;     // per sequence at `context`
  size_t scratch = 0;      // activations of the largest prefill piece
  int64_t context = 0;
  size_t total() const { return weights + gdn_state + kv_cache + scratch; }
  std::string describe() const;  // one line with every part in GiB/MiB
};

MemoryPlan plan_memory(const Model& model, int64_t context, int64_t prefill_tokens);

// Throws lily::Error when `plan` exceeds `budget_bytes` (0: no budget).
void check_memory_budget(const MemoryPlan& plan, double budget_gb);

}  // namespace lily
