#include "lily/runtime/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "lily/error.h"
#include "lily/runtime/greedy.h"
#include "lily/runtime/stop_strings.h"
#include "support/test_support.h"

namespace lily {
namespace {

// Greedy picks what std::max_element picks: the first of equal maxima, also
// among infinities and next to NaNs, across a vocabulary-sized vector.
TEST(Argmax, AgreesWithMaxElement) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::nanf("");
  std::vector<std::vector<float>> cases = {{3.f}, {1.f, 5.f, 5.f, 2.f}, {-inf, -inf}, {-2.f, -1.f, -3.f},
                                           {1.f, inf, 2.f, inf}, {1.f, nan, 3.f}, {nan, 1.f}};
  std::vector<float> big(248320);
  for (size_t i = 0; i < big.size(); ++i) big[i] = std::sin(static_cast<float>(i) * 0.37f);
  big[200000] = 7.f;
  big[231111] = 7.f;
  cases.push_back(big);
  for (const auto& c : cases)
    EXPECT_EQ(argmax(c), std::max_element(c.begin(), c.end()) - c.begin()) << "a case of " << c.size();
}

std::vector<float> logits() { return {0.1f, 2.0f, 1.9f, -1.0f, 0.5f, 1.0f}; }

std::vector<int32_t> draw(SamplingParams p, int n) {
  Sampler s(p);
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) {
    auto l = logits();
    out.push_back(s.sample(l));
  }
  return out;
}

TEST(Sampler, GreedyIsTheArgmax) {
  SamplingParams p;
  p.temperature = 0;
  EXPECT_EQ(draw(p, 3), (std::vector<int32_t>{1, 1, 1}));
}

TEST(Sampler, SeedMakesRunsReproducible) {
  SamplingParams p;
  p.seed = 42;
  const auto a = draw(p, 50), b = draw(p, 50);
  EXPECT_EQ(a, b);
  p.seed = 43;
  EXPECT_NE(draw(p, 50), a);
}

TEST(Sampler, TruncationsKeepOnlyTheirCandidates) {
  SamplingParams p;
  p.seed = 7;
  p.top_k = 1;
  for (int32_t t : draw(p, 20)) EXPECT_EQ(t, 1);
  p.top_k = 2;
  for (int32_t t : draw(p, 50)) EXPECT_TRUE(t == 1 || t == 2);
  p.top_k = 0;
  p.top_p = 0.01;  // only the top token fits
  for (int32_t t : draw(p, 20)) EXPECT_EQ(t, 1);
  p.top_p = 1.0;
  p.min_p = 0.8;  // exp(1.9-2.0) = 0.905 of the top survives, exp(1.0-2.0) = 0.37 does not
  for (int32_t t : draw(p, 50)) EXPECT_TRUE(t == 1 || t == 2);
}

TEST(Sampler, DrawsFollowTheDistribution) {
  SamplingParams p;
  p.seed = 1;
  p.top_k = 2;
  int ones = 0;
  const int n = 4000;
  for (int32_t t : draw(p, n)) ones += t == 1;
  const double want = 1.0 / (1.0 + std::exp(-0.1));  // p(1) among tokens 1 and 2
  EXPECT_NEAR(static_cast<double>(ones) / n, want, 0.03);
}

TEST(Sampler, PenaltiesAndBias) {
  SamplingParams p;
  p.temperature = 0;
  p.logit_bias[3] = 10.f;
  EXPECT_EQ(draw(p, 1)[0], 3);
  p.logit_bias.clear();
  p.presence_penalty = 1.0;  // after token 1 is drawn once, token 2 wins
  EXPECT_EQ(draw(p, 2), (std::vector<int32_t>{1, 2}));
  p.presence_penalty = 0;
  p.repetition_penalty = 1.5;
  Sampler s(p);
  std::vector<int32_t> ctx = {1};
  s.set_context(ctx);  // 2.0 / 1.5 < 1.9
  auto l = logits();
  EXPECT_EQ(s.sample(l), 2);
}

TEST(Sampler, RejectsBadParameters) {
  SamplingParams p;
  p.temperature = -1;
  EXPECT_THROW(Sampler{p}, Error);
  p = SamplingParams();
  p.top_p = 0;
  EXPECT_THROW(p.validate(), Error);
  p = SamplingParams();
  p.min_p = 2;
  EXPECT_THROW(p.validate(), Error);
  p = SamplingParams();
  p.repetition_penalty = 0;
  EXPECT_THROW(p.validate(), Error);
}

TEST(Sampler, DefaultsFromGenerationConfig) {
  const SamplingParams p = SamplingParams::from_generation_config(test::tiny_model_dir());
  EXPECT_EQ(p.top_k, 20);
  EXPECT_DOUBLE_EQ(p.top_p, 0.95);
  test::TempDir d;
  test::write_file(d.str() + "/generation_config.json", R"({"do_sample": false, "temperature": 0.6})");
  EXPECT_EQ(SamplingParams::from_generation_config(d.str()).temperature, 0);
  test::write_file(d.str() + "/generation_config.json", "{broken");
  EXPECT_THROW(SamplingParams::from_generation_config(d.str()), Error);
}

TEST(StopStrings, MatchAcrossPieces) {
  StopStrings s({"STOP", "</end>"});
  std::string out;
  for (const char* piece : {"hello S", "T", "O", "P and more"}) out += s.push(piece);
  EXPECT_TRUE(s.stopped());
  EXPECT_EQ(out, "hello ");
  StopStrings t({"STOP"});
  out.clear();
  for (const char* piece : {"a S", "T", "x"}) out += t.push(piece);  // a false start is released
  out += t.finish();
  EXPECT_FALSE(t.stopped());
  EXPECT_EQ(out, "a STx");
  StopStrings none({});
  EXPECT_EQ(none.push("anything"), "anything");
}

}  // namespace
}  // namespace lily
