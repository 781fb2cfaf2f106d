#include "lily/runtime/memory_plan.h"

#include <cstdio>

#include "lily/error.h"

namespace lily {

namespace {
std::string human(double b) {
  char buf[32];
  if (b >= 1024.0 * 1024 * 1024) std::snprintf(buf, sizeof buf, "%.2f GiB", b / (1024.0 * 1024 * 1024));
  else std::snprintf(buf, sizeof buf, "%.1f MiB", b / (1024.0 * 1024));
  return buf;
}
}  // namespace

std::string MemoryPlan::describe() const {
  return "memory plan at context " + std::to_string(context) + ": weights " + human(static_cast<double>(weights)) +
         " (mapped) + GDN state " + human(static_cast<double>(gdn_state)) + " + KV cache " +
         human(static_cast<double>(kv_cache)) + " + scratch " + human(static_cast<double>(scratch)) + " = " +
         human(static_cast<double>(total()));
}

MemoryPlan plan_memory(const Model& model, int64_t context, int64_t prefill_tokens) {
  const ModelConfig& c = model.config();
  MemoryPlan p;
  p.context = context;
  p.weights = model.report().weight_bytes;
  p.gdn_state = model.recurrent_state_bytes();
  p.kv_cache = model.kv_bytes_per_token() * static_cast<size_t>(context);
  // Per prompt token: the residual stream and norms, the widest projection
  // (GDN q|k|v plus its conv output, or attention q|gate), z, the MoE
  // router and expert activations; plus the logits of one position.
  const int64_t widest = std::max(2 * c.gdn_conv_dim() + c.gdn_value_dim(), 2 * c.num_heads * c.head_dim * 2);
  const int64_t per_token = 4 * c.hidden_size + widest + c.num_experts + 3 * c.moe_intermediate_size;
  p.scratch = static_cast<size_t>(prefill_tokens * per_token + c.vocab_size) * sizeof(float);
  return p;
}

void check_memory_budget(const MemoryPlan& plan, double budget_gb) {
  if (budget_gb <= 0) return;
  const double budget = budget_gb * 1024.0 * 1024 * 1024;
  if (static_cast<double>(plan.total()) > budget) {
    throw Error("does not fit the memory budget of " + human(budget) + ": " + plan.describe() +
                "; use a smaller context, a more quantized checkpoint, or a larger --memory-budget");
  }
}

}  // namespace lily
