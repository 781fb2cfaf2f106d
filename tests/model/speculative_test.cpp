// Speculative decoding never changes an answer: a verify step over a token
// and its drafts gives each row the logits of a decode step after the rows
// before it, bit for bit, and taking rows back leaves the state exactly as
// decode steps over the kept rows alone would (the Gated DeltaNet's conv
// and recurrent states, the KV caches, the MTP head's own cache).
#include <gtest/gtest.h>

#include "lily/backend/backend_factory.h"
#include "lily/backend/cpu/cpu_backend.h"
#include "lily/error.h"
#include "lily/model/qwen35moe.h"
#include "support/test_support.h"

namespace lily {
namespace {

class Speculative : public ::testing::TestWithParam<std::string> {
 protected:
  // "NAME+int8": int8 inputs on the CPU; "NAME+cuda" / "NAME+cuda_f32": the
  // GPU with bf16 / fp32 activations (skipped without one).
  void SetUp() override {
    const std::string param = GetParam(), how = param.find('+') == std::string::npos ? "" : param.substr(param.find('+') + 1);
    if (how.rfind("cuda", 0) == 0) {
      std::string why;
      if (!device_available(Device::Cuda, &why)) GTEST_SKIP() << "no GPU backend here: " << why;
      BackendOptions o;
      o.float_activations = how == "cuda_f32";
      backend_ = make_backend(Device::Cuda, o);
    } else {
      const bool int8 = how == "int8";
      if (int8 && !cpu::has_int8_kernels(cpu::best_isa())) GTEST_SKIP() << "this CPU has no int8 kernel";
      backend_ = std::make_shared<cpu::CpuBackend>(test::cpu_context(cpu::best_isa(), int8));
    }
    const std::string name = param.substr(0, param.find('+'));
    model_ = Model::load(test::model_dir(name));
    // the prompts of the model a fixture was made from
    prompt_ = test::load_reference(test::model_dir(name.substr(0, name.find('-', 5)))).prompts[5].tokens;
    prompt_.resize(70);  // past one chunk of the delta rule
  }
  // Logits of decode steps over `tokens`, one at a time, after `state`.
  std::vector<std::vector<float>> steps(Qwen35MoeForward& fwd, SequenceState& state, const std::vector<int32_t>& tokens) {
    std::vector<std::vector<float>> out;
    for (int32_t t : tokens) out.push_back(fwd.forward(std::span<const int32_t>(&t, 1), state, LogitsFor::LastPosition));
    return out;
  }
  std::shared_ptr<Backend> backend_;
  std::unique_ptr<Model> model_;
  std::vector<int32_t> prompt_;
};

TEST_P(Speculative, EachVerifyRowIsTheDecodeStepAfterTheRowsBeforeIt) {
  Qwen35MoeForward fwd(*model_, backend_);
  const int64_t V = model_->config().vocab_size;
  const std::vector<int32_t> rows = {17, 4, 150, 4, 99};
  SequenceState single = fwd.new_state();
  fwd.forward(prompt_, single, LogitsFor::LastPosition, ForwardMode::Prompt);
  SequenceState verified = single;
  const auto want = steps(fwd, single, rows);
  Qwen35MoeForward::Undo undo;
  const auto got = fwd.verify(rows, verified, undo);
  ASSERT_EQ(got.size(), rows.size() * V);
  for (size_t i = 0; i < rows.size(); ++i)
    EXPECT_TRUE(std::equal(want[i].begin(), want[i].end(), got.begin() + static_cast<int64_t>(i) * V)) << "row " << i;
  EXPECT_EQ(verified.position(), single.position());
}

TEST_P(Speculative, TakingRowsBackLeavesTheStateOfTheKeptStepsAlone) {
  Qwen35MoeForward fwd(*model_, backend_);
  const std::vector<int32_t> rows = {17, 4, 150, 4, 99}, after = {8, 31, 8};
  SequenceState base = fwd.new_state();
  fwd.forward(prompt_, base, LogitsFor::LastPosition, ForwardMode::Prompt);
  for (int64_t keep = 0; keep <= static_cast<int64_t>(rows.size()); ++keep) {
    SequenceState single = base, rewound = base;
    steps(fwd, single, std::vector<int32_t>(rows.begin(), rows.begin() + keep));
    const auto want = steps(fwd, single, after);
    Qwen35MoeForward::Undo undo;
    fwd.verify(rows, rewound, undo);
    fwd.rewind(rewound, undo, keep);
    EXPECT_EQ(rewound.position(), base.position() + keep);
    EXPECT_EQ(steps(fwd, rewound, after), want) << "kept " << keep << " of " << rows.size();
  }
}

// The head kept up over a prompt, drafting and then a verify and rewind:
// with the head on, the model's own logits are those without it.
TEST_P(Speculative, KeepingTheHeadUpChangesNoLogitOfTheModel) {
  if (!model_->weights().mtp) GTEST_SKIP() << "no MTP head in this fixture";
  Qwen35MoeForward plain(*model_, backend_), with(*model_, backend_);
  with.keep_mtp(true);
  SequenceState a = plain.new_state(), b = with.new_state();
  EXPECT_EQ(plain.forward(prompt_, a, LogitsFor::LastPosition, ForwardMode::Prompt),
            with.forward(prompt_, b, LogitsFor::LastPosition, ForwardMode::Prompt));
  const std::vector<int32_t> d = with.draft(b, 9, 3);
  ASSERT_EQ(d.size(), 3u);
  std::vector<int32_t> rows = {9};
  rows.insert(rows.end(), d.begin(), d.end());
  const auto want = steps(plain, a, rows);
  Qwen35MoeForward::Undo undo;
  const auto got = with.verify(rows, b, undo);
  const size_t V = static_cast<size_t>(model_->config().vocab_size);
  for (size_t i = 0; i < rows.size(); ++i)
    EXPECT_TRUE(std::equal(want[i].begin(), want[i].end(), got.begin() + static_cast<int64_t>(i * V))) << "row " << i;
  with.rewind(b, undo, 2);
  SequenceState c = plain.new_state();
  plain.forward(prompt_, c, LogitsFor::LastPosition, ForwardMode::Prompt);
  steps(plain, c, {rows[0], rows[1]});
  EXPECT_EQ(steps(with, b, {5, 6}), steps(plain, c, {5, 6}));
  EXPECT_EQ(with.draft(b, 7, 2).size(), 2u);
}

TEST_P(Speculative, ARewindIsRefusedOnceTheStateHasMoved) {
  Qwen35MoeForward fwd(*model_, backend_);
  SequenceState s = fwd.new_state();
  fwd.forward(prompt_, s, LogitsFor::LastPosition, ForwardMode::Prompt);
  Qwen35MoeForward::Undo undo;
  const std::vector<int32_t> rows = {1, 2, 3};
  fwd.verify(rows, s, undo);
  EXPECT_THROW(fwd.rewind(s, undo, 4), Error);
  steps(fwd, s, {5});
  EXPECT_THROW(fwd.rewind(s, undo, 1), Error);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Speculative,
                         ::testing::Values("tiny-a", "tiny-a-mtp", "tiny-a-mlx4+int8", "tiny-b", "tiny-a-mtp+cuda",
                                           "tiny-a-mtp+cuda_f32", "tiny-a-mlx4+cuda"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n)
                             if (c == '-' || c == '+') c = '_';
                           return n;
                         });

TEST(MtpHead, LoadsFromTheReleaseLayoutAndIsRefusedWhereAbsent) {
  auto with = Model::load(test::model_dir("tiny-a-mtp"));
  auto without = Model::load(test::model_dir("tiny-a-release"));
  EXPECT_TRUE(with->weights().mtp.has_value());
  EXPECT_FALSE(without->weights().mtp.has_value());
  EXPECT_EQ(with->report().skipped_groups.count("mtp"), 0u);  // every mtp.* tensor bound
  Qwen35MoeForward a(*with), b(*without);
  EXPECT_NO_THROW(a.keep_mtp(true));
  EXPECT_THROW(b.keep_mtp(true), Error);
  // the text model's logits do not depend on the head
  SequenceState sa = a.new_state(), sb = b.new_state();
  const auto p = test::load_reference(test::model_dir("tiny-a")).prompts[3].tokens;
  EXPECT_EQ(a.forward(p, sa, LogitsFor::LastPosition, ForwardMode::Prompt),
            b.forward(p, sb, LogitsFor::LastPosition, ForwardMode::Prompt));
}

// The head kept up over a prompt fed whole or resumed at a chunk multiple
// (both bit-exact) drafts the same tokens; fed token by token it drafts
// valid ones; a draft needs the head kept up from the start.
TEST(MtpHead, DraftsDoNotDependOnHowThePromptWasFed) {
  auto model = Model::load(test::model_dir("tiny-a-mtp"));
  Qwen35MoeForward fwd(*model);
  fwd.keep_mtp(true);
  auto p = test::load_reference(test::model_dir("tiny-a")).prompts[5].tokens;
  p.resize(100);
  SequenceState whole = fwd.new_state(), pieces = fwd.new_state(), tokens = fwd.new_state();
  fwd.forward(p, whole, LogitsFor::LastPosition, ForwardMode::Prompt);
  fwd.forward(std::span<const int32_t>(p.data(), 64), pieces, LogitsFor::LastPosition, ForwardMode::Prompt);
  fwd.forward(std::span<const int32_t>(p.data() + 64, 36), pieces, LogitsFor::LastPosition, ForwardMode::Prompt);
  for (int32_t t : p) fwd.forward(std::span<const int32_t>(&t, 1), tokens, LogitsFor::LastPosition);
  const auto d = fwd.draft(whole, 7, 3);
  ASSERT_EQ(d.size(), 3u);
  EXPECT_EQ(fwd.draft(pieces, 7, 3), d);
  for (int32_t t : fwd.draft(tokens, 7, 3)) EXPECT_TRUE(t >= 0 && t < model->config().vocab_size);
  // drafting again from the same state gives the same drafts: its cache entries past the state are scratch
  EXPECT_EQ(fwd.draft(whole, 7, 3), d);

  // a sequence fed while the head was not kept up is refused before anything moves
  Qwen35MoeForward off(*model);
  SequenceState s = off.new_state();
  off.forward(p, s, LogitsFor::LastPosition, ForwardMode::Prompt);
  SequenceState before = s;
  EXPECT_THROW(fwd.forward(std::span<const int32_t>(p.data(), 1), s, LogitsFor::LastPosition), Error);
  EXPECT_THROW(fwd.draft(s, 7, 2), Error);
  EXPECT_EQ(s.position(), before.position());
  const int32_t t = 5;
  EXPECT_EQ(off.forward(std::span<const int32_t>(&t, 1), s, LogitsFor::LastPosition),
            off.forward(std::span<const int32_t>(&t, 1), before, LogitsFor::LastPosition));
}

}  // namespace
}  // namespace lily
