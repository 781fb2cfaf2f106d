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
  // The candidates: the top k in the order (logit descending, id
  // ascending), found without sorting them.
  const int64_t k = p.top_k > 0 ? std::min(p.top_k, V) : V;
  std::vector<int32_t> cand(static_cast<size_t>(V));
  std::iota(cand.begin(), cand.end(), 0);
  if (k < V) {
    std::nth_element(cand.begin(), cand.begin() + (k - 1), cand.end(), before);
    cand.resize(static_cast<size_t>(k));
  }
  const double mx = l[*std::min_element(cand.begin(), cand.end(), before)], inv_t = 1.0 / p.temperature;
  std::vector<double> prob(static_cast<size_t>(V));
  double sum = 0;
  for (const int32_t i : cand) sum += prob[i] = std::exp((static_cast<double>(l[i]) - mx) * inv_t);
  // The cuts keep a prefix of that order. Only a prefix that reaches past
  // them is sorted: the candidates of probability at least a threshold form
  // one (probability follows the logit), and it reaches past the cuts once
  // it holds top_p of the mass, or once the threshold is min_p (every token
  // min_p keeps is in it). Without cuts every candidate is kept, unsorted.
  std::vector<int32_t> order;
  if (p.top_p < 1 || p.min_p > 0) {
    double mass = 0;
    for (double thr = p.min_p > 0 ? p.min_p : 1e-4; thr > 0; thr *= 1e-4) {
      order.clear();
      mass = 0;
      for (const int32_t i : cand)
        if (prob[i] >= thr) order.push_back(i), mass += prob[i];
      if (p.min_p > 0 || mass >= p.top_p * sum || order.size() == cand.size()) break;
    }
    // top_p not reached by every token of nonzero probability: the cut
    // falls past them all, so every candidate stays
    if (p.min_p <= 0 && mass < p.top_p * sum) order = cand;
    std::sort(order.begin(), order.end(), before);
  } else {
    order = cand;
  }
  size_t keep = order.size();
  if (p.top_p < 1) {
    double acc = 0;
    for (size_t i = 0; i < order.size(); ++i)
      if ((acc += prob[order[i]]) >= p.top_p * sum) {
        keep = i + 1;
        break;
      }
  }
  if (p.min_p > 0) {
    size_t n = 1;
    while (n < keep && prob[order[n]] >= p.min_p) ++n;  // the first has probability exp(0) = 1
    keep = n;
  }
  // the draw walks the kept tokens in id order
  order.resize(keep);
  std::sort(order.begin(), order.end());
  double total = 0;
  for (const int32_t id : order) total += prob[id];
  const double target = p.u * total;
  double acc = 0;
  for (const int32_t id : order)
    if (target < (acc += prob[id])) return id;
  return order.back();
}

}  // namespace lily
