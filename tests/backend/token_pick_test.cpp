// pick_token against the definition of a TokenPick written the plain way:
// every candidate sorted, the cuts walked in that order. pick_token sorts
// only the prefix the cuts can reach.
#include "lily/backend/token_pick.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

namespace lily {
namespace {

int32_t plain_pick(std::vector<float> l, const TokenPick& p) {
  apply_adjustments(l, p);
  const int64_t V = static_cast<int64_t>(l.size());
  std::vector<int32_t> order(l.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return l[a] > l[b] || (l[a] == l[b] && a < b); });
  if (p.temperature <= 0) return order[0];
  order.resize(static_cast<size_t>(p.top_k > 0 ? std::min(p.top_k, V) : V));
  std::vector<double> prob;
  double sum = 0;
  for (int32_t i : order) sum += prob.emplace_back(std::exp((static_cast<double>(l[i]) - l[order[0]]) / p.temperature));
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
    while (n < keep && prob[n] >= p.min_p) ++n;
    keep = n;
  }
  std::vector<std::pair<int32_t, double>> kept;
  double total = 0;
  for (size_t i = 0; i < keep; ++i) kept.emplace_back(order[i], prob[i]), total += prob[i];
  std::sort(kept.begin(), kept.end());
  double acc = 0;
  for (const auto& [id, pr] : kept)
    if (p.u * total < (acc += pr)) return id;
  return kept.back().first;
}

TEST(TokenPick, EqualsTheDefinitionOverCutsTiesAndAdjustments) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u01(0.f, 1.f);
  int checked = 0;
  for (int64_t V : {1, 2, 17, 1000, 248320}) {
    for (int round = 0; round < (V > 10000 ? 12 : 60); ++round) {
      std::vector<float> l(static_cast<size_t>(V));
      const float spread = round % 3 == 0 ? 2.f : round % 3 == 1 ? 12.f : 40.f;  // flat to peaked
      for (float& x : l) x = std::round(u01(rng) * spread * 8) / 8;            // many ties
      TokenPick p;
      p.temperature = (round % 4 == 0) ? 0 : 0.3 + u01(rng) * 1.5;
      p.top_k = round % 5 == 0 ? 0 : static_cast<int64_t>(u01(rng) * 60);
      p.top_p = round % 2 ? 1.0 : 0.05 + u01(rng) * 0.95;
      p.min_p = round % 7 < 3 ? 0.0 : u01(rng) * 0.3;
      p.u = u01(rng);
      if (round % 6 == 5 && V > 3) {
        p.repetition_penalty = 1.3f;
        p.adjust = {{0, 3.f, true, 0.f}, {static_cast<int32_t>(V - 1), 0.f, false, 0.5f}};
      }
      EXPECT_EQ(pick_token(l, p), plain_pick(l, p)) << "V=" << V << " round " << round;
      ++checked;
    }
  }
  EXPECT_GT(checked, 200);
}

}  // namespace
}  // namespace lily
