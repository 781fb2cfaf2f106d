// Speculative decoding through what users run: generate() (lily run, chat)
// and the server's scheduler give token for token the answer they give
// without drafts, greedy and sampled with a seed alike (a token is drawn
// from the model's own distribution at every position, the random draws in
// the same order, so a draft only saves the step it was right about).
#include <gtest/gtest.h>

#include "lily/error.h"
#include "lily/runtime/generator.h"
#include "lily/runtime/scheduler.h"
#include "support/test_support.h"

namespace lily {
namespace {

using namespace std::chrono_literals;

// The fixture with an MTP head, with the bundled tokenizer and template beside it.
class SpeculativeGeneration : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new test::TempDir();
    test::copy_dir(test::model_dir("tiny-a-mtp"), dir_->str());
    for (const char* f : {"tokenizer.json", "tokenizer_config.json", "chat_template.jinja"})
      std::filesystem::copy_file(std::filesystem::path(test::tiny_model_dir()) / f, dir_->path() / f);
    engine_ = Engine::load(dir_->str()).release();
  }
  static void TearDownTestSuite() {
    delete engine_;
    delete dir_;
  }
  static GenerationRequest request(uint64_t seed, double temperature) {
    GenerationRequest g;
    g.prompt = test::load_reference(test::model_dir("tiny-a")).prompts[seed % 6].tokens;
    g.sampling = engine_->default_sampling();
    g.sampling.temperature = temperature;
    g.sampling.top_k = 40;
    g.sampling.seed = seed;
    g.max_tokens = 40;
    return g;
  }
  static test::TempDir* dir_;
  static Engine* engine_;
};
test::TempDir* SpeculativeGeneration::dir_ = nullptr;
Engine* SpeculativeGeneration::engine_ = nullptr;

TEST_F(SpeculativeGeneration, GenerateGivesTheSameTokensWithAndWithoutDrafts) {
  int64_t accepted = 0;
  for (uint64_t seed : {0, 3, 5})  // prompts of 1 to 130 tokens
    for (double temperature : {0.0, 0.8}) {
      const GenerationRequest g = request(seed, temperature);
      for (int64_t k : {1, 3}) {
        Session plain(engine_->model()), spec(engine_->model());
        const GenerationResult want = generate(*engine_, plain, g, [](const std::string&) { return true; });
        spec.set_mtp(k);
        const GenerationResult got = generate(*engine_, spec, g, [](const std::string&) { return true; });
        EXPECT_EQ(got.tokens, want.tokens) << "seed " << seed << " temperature " << temperature << " drafts " << k;
        EXPECT_EQ(got.text, want.text);
        EXPECT_GT(got.verify_steps, 0);
        accepted += static_cast<int64_t>(got.tokens.size()) - 1 - got.verify_steps;
        // the session holds what it fed, and goes on as the plain one does
        EXPECT_EQ(spec.tokens(), plain.tokens());
        EXPECT_EQ(spec.step(3), plain.step(3));
      }
    }
  std::cout << "drafts accepted over the runs: " << accepted << "\n";
}

TEST_F(SpeculativeGeneration, AModelWithoutAHeadIsRefused) {
  auto model = Model::load(test::model_dir("tiny-a"));
  Session s(*model);
  EXPECT_THROW(s.set_mtp(2), Error);
  EXPECT_THROW(Session(engine_->model()).set_mtp(99), Error);
}

TEST_F(SpeculativeGeneration, TheSchedulerGivesEveryStreamItsAnswerWithoutDrafts) {
  std::vector<Job> jobs;
  for (uint64_t i = 0; i < 4; ++i) {
    Job j;
    const GenerationRequest g = request(i, i % 2 ? 0.8 : 0.0);
    j.prompt = g.prompt;
    j.params.sampling = g.sampling;
    j.params.max_tokens = 20 + static_cast<int64_t>(i);
    jobs.push_back(j);
  }
  auto run_all = [&](int64_t mtp) {
    SchedulerOptions opt;
    opt.mtp = mtp;
    opt.prefill_chunk = 64;
    Scheduler s(*engine_, opt);
    std::vector<std::shared_ptr<Ticket>> tickets;
    for (const Job& j : jobs) tickets.push_back(s.submit(j));
    // and again, so prompts resume from the prefix cache
    for (const Job& j : jobs) tickets.push_back(s.submit(j));
    std::vector<std::vector<int32_t>> out;
    for (auto& t : tickets) {
      JobEvent ev;
      for (;;) {
        if (!t->next(ev, 60s)) throw std::runtime_error("no event for a minute");
        if (ev.kind == JobEvent::Kind::Failed) throw std::runtime_error(ev.error);
        if (ev.kind == JobEvent::Kind::Done) break;
      }
      out.push_back(ev.generated);
    }
    return out;
  };
  const auto want = run_all(0), got = run_all(2);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(got[i], want[i]) << "request " << i;
}

}  // namespace
}  // namespace lily
