#include "lily/runtime/sampler.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>

#include "lily/backend/token_pick.h"
#include "lily/error.h"
#include "lily/io/bounded_input.h"

namespace lily {

SamplingParams SamplingParams::from_generation_config(const std::string& dir) {
  SamplingParams p;
  const auto path = std::filesystem::path(dir) / "generation_config.json";
  if (!std::filesystem::exists(path)) return p;
  const nlohmann::json j = parse_json(read_regular_file(path.string(), kMaxGenerationConfigBytes), path.string());
  if (!j.is_object()) throw Error(path.string() + ": not a JSON object");
  auto num = [&](const char* k, double def) {
    if (!j.contains(k) || j[k].is_null()) return def;
    if (!j[k].is_number()) throw Error(path.string() + ": " + k + " must be a number, got " + j[k].dump());
    return j[k].get<double>();
  };
  p.temperature = num("temperature", p.temperature);
  p.top_k = static_cast<int64_t>(num("top_k", 0));
  p.top_p = num("top_p", p.top_p);
  p.min_p = num("min_p", p.min_p);
  p.repetition_penalty = num("repetition_penalty", p.repetition_penalty);
  p.presence_penalty = num("presence_penalty", p.presence_penalty);
  if (j.contains("do_sample") && j["do_sample"].is_boolean() && !j["do_sample"].get<bool>()) p.temperature = 0;
  try {
    p.validate();
  } catch (const Error& e) {
    throw Error(path.string() + ": " + e.what());
  }
  return p;
}

void SamplingParams::validate() const {
  if (!(temperature >= 0) || !std::isfinite(temperature)) throw Error("temperature must be >= 0");
  if (top_k < 0) throw Error("top_k must be >= 0");
  if (!(top_p > 0 && top_p <= 1)) throw Error("top_p must be in (0, 1]");
  if (!(min_p >= 0 && min_p <= 1)) throw Error("min_p must be in [0, 1]");
  if (!(repetition_penalty > 0) || !std::isfinite(repetition_penalty)) throw Error("repetition_penalty must be > 0");
  if (!(std::abs(presence_penalty) <= 2)) throw Error("presence_penalty must be in [-2, 2]");
  if (!(std::abs(frequency_penalty) <= 2)) throw Error("frequency_penalty must be in [-2, 2]");
}

Sampler::Sampler(SamplingParams p) : p_(std::move(p)) {
  p_.validate();
  rng_.seed(p_.seed ? *p_.seed : std::random_device{}());
}

void Sampler::set_context(std::span<const int32_t> tokens) {
  for (int32_t t : tokens) {
    if (t < 0) continue;
    if (static_cast<size_t>(t) >= seen_mask_.size()) seen_mask_.resize(static_cast<size_t>(t) + 1, 0);
    if (!seen_mask_[t]) seen_.push_back(t);
    seen_mask_[t] = 1;
  }
}

TokenPick Sampler::plan(int64_t vocab) {
  TokenPick t;
  t.temperature = p_.temperature;
  t.top_k = p_.top_k;
  t.top_p = p_.top_p;
  t.min_p = p_.min_p;
  t.repetition_penalty = static_cast<float>(p_.repetition_penalty);
  std::map<int32_t, LogitAdjust> adj;  // one entry per id, in id order
  auto at = [&](int32_t id) -> LogitAdjust& {
    LogitAdjust& a = adj[id];
    a.id = id;
    return a;
  };
  for (const auto& [id, bias] : p_.logit_bias)
    if (id >= 0 && id < vocab) at(id).bias += bias;
  if (p_.repetition_penalty != 1.0)
    for (int32_t id : seen_)
      if (id < vocab) at(id).repeated = true;
  for (const auto& [id, n] : generated_counts_)
    if (id < vocab && (p_.presence_penalty != 0 || p_.frequency_penalty != 0))
      at(id).subtract += static_cast<float>(p_.presence_penalty + p_.frequency_penalty * n);
  for (const auto& [id, a] : adj) t.adjust.push_back(a);
  if (t.temperature > 0) t.u = std::uniform_real_distribution<double>(0.0, 1.0)(rng_);
  return t;
}

void Sampler::record(int32_t token) {
  generated_counts_[token]++;
  set_context(std::span<const int32_t>(&token, 1));
}

int32_t Sampler::sample(std::vector<float>& logits) { return sample(logits, nullptr); }

int32_t Sampler::sample(std::vector<float>& logits, const std::function<bool(int32_t)>& allowed) {
  const int64_t V = static_cast<int64_t>(logits.size());
  TokenPick t = plan(V);
  if (!allowed) {
    const int32_t pick = pick_token(logits, t);
    record(pick);
    return pick;
  }
  // Constrained: the adjustments go into the logits, then refused tokens are struck out.
  apply_adjustments(logits, t);
  t.adjust.clear();
  // Out of the allowed tokens the best is found by logit first; only that
  // search can be long, and it is over once one token passes.
  std::vector<int32_t> order(static_cast<size_t>(V));
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); });
  size_t first = 0;
  while (first < order.size() && !allowed(order[first])) logits[order[first++]] = -INFINITY;
  if (first == order.size()) return -1;
  int32_t pick = -1;
  if (p_.temperature == 0) {
    pick = order[first];
  } else {
    for (int tries = 0; tries < 64 && pick < 0; ++tries) {
      if (tries > 0) t.u = std::uniform_real_distribution<double>(0.0, 1.0)(rng_);
      const int32_t c = pick_token(logits, t);
      if (allowed(c))
        pick = c;
      else
        logits[c] = -INFINITY;
    }
    if (pick < 0) pick = order[first];
  }
  record(pick);
  return pick;
}

}  // namespace lily
