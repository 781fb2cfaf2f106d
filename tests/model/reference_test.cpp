// The CPU forward pass against transformers' float32 outputs on every
// committed fixture, in both checkpoint layouts, whichever way the prompt is fed.
#include <gtest/gtest.h>

#include "lily/error.h"
#include "lily/model/qwen35moe.h"
#include "lily/runtime/greedy.h"
#include "support/test_support.h"

namespace lily {
namespace {

constexpr double kMaxRelativeError = 1e-4;

struct Case {
  std::string model;      // directory under tests/data/models
  std::string reference;  // fixture holding reference.json
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.model; }

class ReferenceTest : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    model_ = Model::load(test::model_dir(GetParam().model));
    ref_ = test::load_reference(test::model_dir(GetParam().reference));
    ASSERT_EQ(ref_.vocab, model_->config().vocab_size);
  }

  // Logits for every position, feeding the prompt in pieces of `step` tokens (0: one prefill).
  std::vector<float> run(const std::vector<int32_t>& tokens, size_t step) {
    Qwen35MoeForward fwd(*model_);
    SequenceState state = fwd.new_state();
    if (step == 0) step = tokens.size();
    std::vector<float> all;
    for (size_t i = 0; i < tokens.size(); i += step) {
      const size_t n = std::min(step, tokens.size() - i);
      auto l = fwd.forward(std::span<const int32_t>(tokens.data() + i, n), state, LogitsFor::AllPositions);
      all.insert(all.end(), l.begin(), l.end());
    }
    EXPECT_EQ(state.position(), static_cast<int64_t>(tokens.size()));
    return all;
  }

  std::unique_ptr<Model> model_;
  test::Reference ref_;
};

TEST_P(ReferenceTest, PrefillMatchesTransformers) {
  for (const auto& p : ref_.prompts) {
    const double err = test::max_row_relative_error(run(p.tokens, 0), p.logits, ref_.vocab);
    EXPECT_LE(err, kMaxRelativeError) << "prompt of " << p.tokens.size() << " tokens";
  }
}

TEST_P(ReferenceTest, TokenByTokenDecodeMatchesTransformers) {
  for (const auto& p : ref_.prompts) {
    const double err = test::max_row_relative_error(run(p.tokens, 1), p.logits, ref_.vocab);
    EXPECT_LE(err, kMaxRelativeError) << "prompt of " << p.tokens.size() << " tokens";
  }
}

TEST_P(ReferenceTest, ChunkedPrefillMatchesTransformers) {
  for (size_t step : {5, 50, 64}) {
    for (const auto& p : ref_.prompts) {
      if (p.tokens.size() <= step) continue;
      const double err = test::max_row_relative_error(run(p.tokens, step), p.logits, ref_.vocab);
      EXPECT_LE(err, kMaxRelativeError) << "prompt of " << p.tokens.size() << " tokens in pieces of " << step;
    }
  }
}

TEST_P(ReferenceTest, GreedyContinuationMatchesTransformers) {
  for (const auto& p : ref_.prompts) {
    Qwen35MoeForward fwd(*model_);
    SequenceState state = fwd.new_state();
    GreedyOptions opt;
    opt.max_tokens = static_cast<int64_t>(p.greedy.size());
    EXPECT_EQ(generate_greedy(fwd, state, p.tokens, opt), p.greedy) << "prompt of " << p.tokens.size() << " tokens";
  }
}

TEST_P(ReferenceTest, TokenOutsideTheVocabularyIsRefusedWithoutTouchingTheState) {
  Qwen35MoeForward fwd(*model_);
  SequenceState state = fwd.new_state();
  const auto& p = ref_.prompts[1];
  fwd.forward(std::span<const int32_t>(p.tokens.data(), 3), state, LogitsFor::LastPosition);
  const std::vector<int32_t> bad = {1, static_cast<int32_t>(ref_.vocab), 2};
  try {
    fwd.forward(bad, state, LogitsFor::LastPosition);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("token id " + std::to_string(ref_.vocab) + " at position 1 is outside"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(state.position(), 3);
  // the sequence goes on as if the bad call never happened
  std::vector<float> rest =
      fwd.forward(std::span<const int32_t>(p.tokens.data() + 3, p.tokens.size() - 3), state, LogitsFor::AllPositions);
  std::vector<float> want(p.logits.begin() + 3 * ref_.vocab, p.logits.end());
  EXPECT_LE(test::max_row_relative_error(rest, want, ref_.vocab), kMaxRelativeError);
  EXPECT_THROW(fwd.forward(std::vector<int32_t>{-1}, state, LogitsFor::LastPosition), Error);
  EXPECT_THROW(fwd.forward(std::vector<int32_t>{}, state, LogitsFor::LastPosition), Error);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, ReferenceTest,
                         ::testing::Values(Case{"tiny-a", "tiny-a"}, Case{"tiny-b", "tiny-b"}, Case{"tiny-c", "tiny-c"},
                                           Case{"tiny-a-release", "tiny-a"}, Case{"tiny-b-release", "tiny-b"},
                                           Case{"tiny-c-release", "tiny-c"},
                                           // llama.cpp's layout (tools/make_gguf_fixtures.py), every tensor F32
                                           Case{"tiny-a.gguf", "tiny-a"}, Case{"tiny-c.gguf", "tiny-c"}),
                         [](const auto& info) {
                           std::string n = info.param.model;
                           for (char& c : n)
                             if (c == '-' || c == '.') c = '_';
                           return n;
                         });

}  // namespace
}  // namespace lily
