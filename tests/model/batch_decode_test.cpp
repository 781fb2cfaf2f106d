// Batching never changes an answer: a decode step taken for several sequences
// at once gives each one the same logits, bit for bit, as a step taken for it
// alone, and a prompt resumed at a chunk multiple is computed exactly as a
// fresh one, however short the rest is. The server's continuous batching and
// prefix cache depend on both.
#include <gtest/gtest.h>

#include "lily/backend/cpu/cpu_backend.h"
#include "lily/error.h"
#include "lily/io/mapped_file.h"
#include "lily/model/qwen35moe.h"
#include "support/test_support.h"

namespace lily {
namespace {

// "NAME+int8": the fixture with int8 inputs for its 4/8-bit products (the
// CLI's default where the CPU has a kernel; AMX for prompts where present).
std::string model_of(const std::string& param) { return param.substr(0, param.find('+')); }
// MLX conversions share the reference prompts of the model they were made from.
std::string reference_of(const std::string& param) {
  const std::string m = model_of(param);
  return m.substr(0, m.find("-mlx"));
}

class BatchDecode : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    const bool int8 = GetParam().find("+int8") != std::string::npos;
    if (int8 && !cpu::has_int8_kernels(cpu::best_isa())) GTEST_SKIP() << "this CPU has no int8 kernel";
    backend_ = std::make_shared<cpu::CpuBackend>(test::cpu_context(cpu::best_isa(), int8));
  }
  std::shared_ptr<Backend> backend_;
};

TEST_P(BatchDecode, EachRowEqualsItsOwnSingleStep) {
  auto model = Model::load(test::model_dir(model_of(GetParam())));
  const auto ref = test::load_reference(test::model_dir(reference_of(GetParam())));
  Qwen35MoeForward fwd(*model, backend_);
  // sequences at different positions, with different histories (one empty)
  std::vector<std::vector<int32_t>> prompts = {ref.prompts[5].tokens, ref.prompts[1].tokens, {}, ref.prompts[3].tokens};
  prompts[0].resize(77);
  const int64_t V = model->config().vocab_size;
  std::vector<SequenceState> batched, single;
  for (const auto& p : prompts) {
    batched.push_back(fwd.new_state());
    single.push_back(fwd.new_state());
    if (p.empty()) continue;
    fwd.forward(p, batched.back(), LogitsFor::LastPosition, ForwardMode::Prompt);
    fwd.forward(p, single.back(), LogitsFor::LastPosition, ForwardMode::Prompt);
  }
  std::vector<int32_t> next = {11, 22, 33, 44};
  for (int step = 0; step < 3; ++step) {
    std::vector<SequenceState*> states;
    for (auto& s : batched) states.push_back(&s);
    const auto rows = fwd.decode_batch(next, states);
    ASSERT_EQ(rows.size(), next.size() * V);
    for (size_t i = 0; i < next.size(); ++i) {
      const auto one = fwd.forward(std::span<const int32_t>(&next[i], 1), single[i], LogitsFor::LastPosition);
      EXPECT_TRUE(std::equal(one.begin(), one.end(), rows.begin() + i * V)) << "sequence " << i << " step " << step;
      EXPECT_EQ(batched[i].position(), single[i].position());
      next[i] = static_cast<int32_t>((next[i] * 7 + step) % V);
    }
  }
}

TEST_P(BatchDecode, AResumedPromptIsBitExactWhateverTheRest) {
  auto model = Model::load(test::model_dir(model_of(GetParam())));
  const auto ref = test::load_reference(test::model_dir(reference_of(GetParam())));
  const auto& full = ref.prompts[5].tokens;  // 130 tokens
  Qwen35MoeForward fwd(*model, backend_);
  for (size_t len : {65u, 66u, 69u, 130u}) {
    const std::vector<int32_t> prompt(full.begin(), full.begin() + len);
    SequenceState fresh = fwd.new_state(), resumed = fwd.new_state();
    const auto want = fwd.forward(prompt, fresh, LogitsFor::LastPosition, ForwardMode::Prompt);
    fwd.forward(std::span<const int32_t>(prompt.data(), 64), resumed, LogitsFor::LastPosition, ForwardMode::Prompt);
    const auto got = fwd.forward(std::span<const int32_t>(prompt.data() + 64, len - 64), resumed,
                                 LogitsFor::LastPosition, ForwardMode::Prompt);
    EXPECT_EQ(got, want) << "prompt of " << len << " resumed at 64";
  }
}

TEST_P(BatchDecode, PromptsPrefilledTogetherEqualEachAlone) {
  auto model = Model::load(test::model_dir(model_of(GetParam())));
  const auto ref = test::load_reference(test::model_dir(reference_of(GetParam())));
  Qwen35MoeForward fwd(*model, backend_);
  const int64_t V = model->config().vocab_size;
  const auto& full = ref.prompts[5].tokens;  // 130 tokens
  // a fresh prompt, one resumed at 64, a one-token prompt, and a long one
  std::vector<std::vector<int32_t>> before = {{}, std::vector<int32_t>(full.begin(), full.begin() + 64), {}, {}};
  std::vector<std::vector<int32_t>> pieces = {ref.prompts[2].tokens, std::vector<int32_t>(full.begin() + 64, full.end()),
                                              {full[7]}, full};
  std::vector<SequenceState> together, alone;
  std::vector<SequenceState*> ptrs;
  for (size_t i = 0; i < pieces.size(); ++i) {
    together.push_back(fwd.new_state());
    alone.push_back(fwd.new_state());
  }
  for (size_t i = 0; i < pieces.size(); ++i) {
    if (!before[i].empty()) {
      fwd.forward(before[i], together[i], LogitsFor::LastPosition, ForwardMode::Prompt);
      fwd.forward(before[i], alone[i], LogitsFor::LastPosition, ForwardMode::Prompt);
    }
    ptrs.push_back(&together[i]);
  }
  const auto rows = fwd.prefill_batch(pieces, ptrs);
  ASSERT_EQ(rows.size(), pieces.size() * V);
  for (size_t i = 0; i < pieces.size(); ++i) {
    const auto one = fwd.forward(pieces[i], alone[i], LogitsFor::LastPosition, ForwardMode::Prompt);
    EXPECT_TRUE(std::equal(one.begin(), one.end(), rows.begin() + i * V)) << "piece " << i;
    EXPECT_EQ(together[i].position(), alone[i].position());
  }
  // and the states go on identically
  std::vector<int32_t> next = {1, 2, 3, 4};
  const auto step = fwd.decode_batch(next, ptrs);
  for (size_t i = 0; i < pieces.size(); ++i) {
    const auto one = fwd.forward(std::span<const int32_t>(&next[i], 1), alone[i], LogitsFor::LastPosition);
    EXPECT_TRUE(std::equal(one.begin(), one.end(), step.begin() + i * V)) << "step of " << i;
  }
}

// Weights read into memory of their own (--no-mmap) give the mapped ones' logits, bit for bit.
TEST(WeightResidency, OwnedWeightsGiveTheMappedLogits) {
  const auto ref = test::load_reference(test::model_dir("tiny-a"));
  auto mapped = Model::load(test::model_dir("tiny-a-mlx4"));
  set_residency(Residency::Owned);
  auto owned = Model::load(test::model_dir("tiny-a-mlx4"));
  set_residency(Residency::Mapped);
  Qwen35MoeForward fm(*mapped), fo(*owned);
  SequenceState a = fm.new_state(), b = fo.new_state();
  const auto want = fm.forward(ref.prompts[5].tokens, a, LogitsFor::LastPosition, ForwardMode::Prompt);
  const auto got = fo.forward(ref.prompts[5].tokens, b, LogitsFor::LastPosition, ForwardMode::Prompt);
  EXPECT_EQ(got, want);
}

TEST(BatchDecodeInput, MismatchedOrBadTokensAreRefused) {
  auto model = Model::load(test::model_dir("tiny-a"));
  Qwen35MoeForward fwd(*model);
  SequenceState a = fwd.new_state(), b = fwd.new_state();
  std::vector<SequenceState*> states = {&a, &b};
  EXPECT_THROW(fwd.decode_batch(std::vector<int32_t>{1}, states), Error);
  EXPECT_THROW(fwd.decode_batch(std::vector<int32_t>{1, -3}, states), Error);
  EXPECT_EQ(a.position(), 0);
  EXPECT_THROW(fwd.forward(std::vector<int32_t>{1, 2}, a, LogitsFor::LastPosition, ForwardMode::Decode), Error);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, BatchDecode, ::testing::Values("tiny-a", "tiny-b", "tiny-c", "tiny-a-mlx4", "tiny-a-mlx3-g32",
                                                                   "tiny-a-mlx4+int8"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n)
                             if (c == '-' || c == '+') c = '_';
                           return n;
                         });

}  // namespace
}  // namespace lily
