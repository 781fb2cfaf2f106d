// A session reuses its state or its checkpoint only when they hold a prefix
// of the new prompt, and the logits are the same as from a fresh state.
#include "lily/runtime/session.h"

#include <gtest/gtest.h>

#include "lily/error.h"
#include "lily/io/model_locator.h"
#include "support/test_support.h"

namespace lily {
namespace {

std::vector<float> fresh_last_logits(const Model& m, const std::vector<int32_t>& toks) {
  Session s(m);
  return s.prefill(toks);
}

TEST(Session, CheckpointReuseGivesIdenticalLogits) {
  auto model = Model::load(test::model_dir("tiny-a"));
  const auto ref = test::load_reference(test::model_dir("tiny-a"));
  const auto& full = ref.prompts[5].tokens;  // 130 tokens
  const std::vector<int32_t> turn1(full.begin(), full.begin() + 70);
  Session s(*model);
  s.prefill(turn1, 60);  // checkpoint at 60
  EXPECT_EQ(s.reused_tokens(), 0u);
  s.step(5);  // the state moves past the checkpoint with a "generated" token
  const auto logits = s.prefill(full);  // not a prefix of the state, but of the checkpoint
  EXPECT_EQ(s.reused_tokens(), 60u);
  // resumed from position 60 the chunks fall differently: equal up to rounding
  EXPECT_LE(test::max_row_relative_error(logits, fresh_last_logits(*model, full), model->config().vocab_size), 1e-5);
  // extending the current state reuses all of it
  std::vector<int32_t> longer = full;
  longer.push_back(7);
  s.prefill(longer);
  EXPECT_EQ(s.reused_tokens(), full.size());
  // an unrelated prompt starts over
  s.prefill({1, 2, 3});
  EXPECT_EQ(s.reused_tokens(), 0u);
  EXPECT_THROW(s.prefill({}), Error);
}

TEST(Session, ResumingAtAChunkMultipleIsBitExact) {
  auto model = Model::load(test::model_dir("tiny-b"));
  const auto ref = test::load_reference(test::model_dir("tiny-b"));
  const auto& full = ref.prompts[5].tokens;  // 130 tokens
  Session s(*model);
  s.prefill(std::vector<int32_t>(full.begin(), full.begin() + 100), 64);
  s.step(3);
  const auto logits = s.prefill(full);
  EXPECT_EQ(s.reused_tokens(), 64u);
  EXPECT_EQ(logits, fresh_last_logits(*model, full));
}

TEST(ModelLocator, ResolvesTheHuggingFaceCacheOffline) {
  test::TempDir d;
  const auto snap = d.path() / "models--Qwen--Qwen3.6-35B-A3B" / "snapshots" / "abc123";
  std::filesystem::create_directories(snap);
  std::filesystem::create_directories(d.path() / "models--Qwen--Qwen3.6-35B-A3B" / "refs");
  test::write_file((d.path() / "models--Qwen--Qwen3.6-35B-A3B" / "refs" / "main").string(), "abc123");
  test::write_file((snap / "config.json").string(), "{}");
  setenv("HF_HUB_CACHE", d.str().c_str(), 1);
  EXPECT_EQ(locate_model("Qwen/Qwen3.6-35B-A3B"), snap.string());
  try {
    locate_model("Qwen/Missing-Model");
    FAIL();
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("not in the Hugging Face cache"), std::string::npos) << m;
    EXPECT_NE(m.find("lily pull Qwen/Missing-Model"), std::string::npos) << m;
  }
  unsetenv("HF_HUB_CACHE");
  setenv("HF_HOME", d.str().c_str(), 1);  // then $HF_HOME/hub
  EXPECT_THROW(locate_model("Qwen/Qwen3.6-35B-A3B"), Error);
  unsetenv("HF_HOME");
  EXPECT_EQ(locate_model(test::model_dir("tiny-a")), test::model_dir("tiny-a"));
  EXPECT_THROW(locate_model("no-such-dir"), Error);
}

}  // namespace
}  // namespace lily

#include "lily/runtime/memory_plan.h"

namespace lily {
namespace {

TEST(MemoryPlan, CountsEveryPartAndRefusesBeyondTheBudget) {
  auto model = Model::load(test::model_dir("tiny-a"));
  const MemoryPlan p = plan_memory(*model, 1000, 100);
  EXPECT_EQ(p.weights, model->report().weight_bytes);
  EXPECT_EQ(p.kv_cache, model->kv_bytes_per_token() * 1000);
  EXPECT_EQ(p.gdn_state, model->recurrent_state_bytes());
  EXPECT_GT(p.scratch, 0u);
  EXPECT_EQ(p.total(), p.weights + p.kv_cache + p.gdn_state + p.scratch);
  EXPECT_NO_THROW(check_memory_budget(p, 0));  // no budget
  EXPECT_NO_THROW(check_memory_budget(p, 1.0));
  try {
    check_memory_budget(p, 0.0001);
    FAIL();
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("does not fit the memory budget"), std::string::npos) << m;
    EXPECT_NE(m.find("KV cache"), std::string::npos) << m;
  }
}

}  // namespace
}  // namespace lily
