#include "lily/backend/token_pick.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "lily/error.h"

namespace lily {

void apply_adjustments(std::span<float> l, const TokenPick& p) {
  const int64_t V = static_cast<int64_t>(l.size());
  for (const LogitAdjust& a : p.adjust) {
    if (a.id < 0 || a.id >= V) throw Error("pick_token: an adjustment of token " + std::to_string(a.id) + " outside the vocabulary");
    float v = l[a.id] + a.bias;
    if (a.repeated) v = v > 0 ? v / p.repetition_penalty : v * p.repetition_penalty;
    l[a.id] = v - a.subtract;
  }
}

int32_t pick_token(std::span<const float> row, const TokenPick& p) {
  const int64_t V = static_cast<int64_t>(row.size());
  if (V == 0) throw Error("pick_token: an empty row of logits");
  std::vector<float> l(row.begin(), row.end());
  apply_adjustments(l, p);
  auto before = [&](int32_t a, int32_t b) { return l[a] > l[b] || (l[a] == l[b] && a < b); };
  if (p.temperature <= 0) {
    int32_t best = 0;
    for (int32_t i = 1; i < V; ++i)
      if (before(i, best)) best = i;
    return best;
  }
  const int64_t k = p.top_k > 0 ? std::min(p.top_k, V) : V;
  std::vector<int32_t> order(static_cast<size_t>(V));
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + k, order.end(), before);
  order.resize(static_cast<size_t>(k));
  const double mx = l[order[0]], inv_t = 1.0 / p.temperature;
  std::vector<double> prob(order.size());
  double sum = 0;
  for (size_t i = 0; i < order.size(); ++i) sum += prob[i] = std::exp((static_cast<double>(l[order[i]]) - mx) * inv_t);
  size_t keep = order.size();
  if (p.top_p < 1) {
    double acc = 0;
    for (size_t i = 0; i < order.size(); ++i)
      if ((acc += prob[i]) >= p.top_p * sum) {
        keep = i + 1;
        break;
      }
  }
  if (p.min_p > 0) {
    size_t n = 1;
    while (n < keep && prob[n] >= p.min_p) ++n;  // prob[0] is exp(0) = 1
    keep = n;
  }
  // the draw walks the kept tokens in id order
  std::vector<std::pair<int32_t, double>> kept;
  double total = 0;
  for (size_t i = 0; i < keep; ++i) kept.emplace_back(order[i], prob[i]), total += prob[i];
  std::sort(kept.begin(), kept.end());
  const double target = p.u * total;
  double acc = 0;
  for (const auto& [id, pr] : kept)
    if (target < (acc += pr)) return id;
  return kept.back().first;
}

}  // namespace lily
