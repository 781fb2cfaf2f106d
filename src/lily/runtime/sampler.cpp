#include "lily/runtime/sampler.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>

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

int32_t Sampler::sample(std::vector<float>& logits) { return sample(logits, nullptr); }

int32_t Sampler::sample(std::vector<float>& logits, const std::function<bool(int32_t)>& allowed) {
  const int64_t V = static_cast<int64_t>(logits.size());
  for (const auto& [id, bias] : p_.logit_bias)
    if (id >= 0 && id < V) logits[id] += bias;
  if (p_.repetition_penalty != 1.0) {
    const float rp = static_cast<float>(p_.repetition_penalty);
    for (int32_t t : seen_)
      if (t < V) logits[t] = logits[t] > 0 ? logits[t] / rp : logits[t] * rp;
  }
  for (const auto& [t, n] : generated_counts_) {
    if (t >= V) continue;
    logits[t] -= static_cast<float>(p_.presence_penalty + p_.frequency_penalty * n);
  }

  int32_t pick = -1;
  if (allowed) {
    // Out of the allowed tokens the best is found by logit first; only that
    // search can be long, and it is over once one token passes.
    std::vector<int32_t> order(static_cast<size_t>(V));
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(),
              [&](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); });
    size_t first = 0;
    while (first < order.size() && !allowed(order[first])) logits[order[first++]] = -INFINITY;
    if (first == order.size()) return -1;
    if (p_.temperature == 0) {
      pick = order[first];
    } else {
      for (int tries = 0; tries < 64 && pick < 0; ++tries) {
        const int32_t t = draw(logits);
        if (allowed(t)) pick = t;
        else logits[t] = -INFINITY;
      }
      if (pick < 0) pick = order[first];
    }
  } else if (p_.temperature == 0) {
    pick = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  } else {
    pick = draw(logits);
  }
  generated_counts_[pick]++;
  set_context(std::span<const int32_t>(&pick, 1));
  return pick;
}

int32_t Sampler::draw(const std::vector<float>& logits) {
  const int64_t V = static_cast<int64_t>(logits.size());
  int32_t pick;
  {
    // Candidates sorted by logit; top-k first as it bounds the work.
    std::vector<int32_t> idx(static_cast<size_t>(V));
    std::iota(idx.begin(), idx.end(), 0);
    const int64_t k = p_.top_k > 0 ? std::min(p_.top_k, V) : V;
    auto by_logit = [&](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); };
    std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), by_logit);
    idx.resize(static_cast<size_t>(k));
    const double inv_t = 1.0 / p_.temperature;
    const double mx = logits[idx[0]];
    std::vector<double> prob(idx.size());
    double sum = 0;
    for (size_t i = 0; i < idx.size(); ++i) sum += prob[i] = std::exp((logits[idx[i]] - mx) * inv_t);
    for (double& x : prob) x /= sum;
    size_t keep = prob.size();
    if (p_.top_p < 1.0) {
      double acc = 0;
      for (size_t i = 0; i < prob.size(); ++i) {
        acc += prob[i];
        if (acc >= p_.top_p) {
          keep = i + 1;
          break;
        }
      }
    }
    if (p_.min_p > 0) {
      const double floor = p_.min_p * prob[0];
      size_t n = 1;
      while (n < keep && prob[n] >= floor) ++n;
      keep = n;
    }
    double total = 0;
    for (size_t i = 0; i < keep; ++i) total += prob[i];
    std::uniform_real_distribution<double> u(0.0, total);
    double r = u(rng_), acc = 0;
    pick = idx[keep - 1];
    for (size_t i = 0; i < keep; ++i) {
      acc += prob[i];
      if (r < acc) {
        pick = idx[i];
        break;
      }
    }
  }
  return pick;
}

}  // namespace lily
