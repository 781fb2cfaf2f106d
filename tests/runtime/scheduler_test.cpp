// The server's scheduler on the bundled model: concurrent requests get what
// they would get alone, prefixes are resumed from the cache without changing
// an answer, and cancellation, the queue bound, timeouts and constrained
// output behave.
#include "lily/runtime/scheduler.h"

#include <gtest/gtest.h>

#include "lily/error.h"
#include "lily/text/json_prefix.h"
#include "support/test_support.h"

namespace lily {
namespace {

using namespace std::chrono_literals;

struct Outcome {
  std::string text;
  JobEvent done;
  std::vector<TokenLogprob> logprobs;
};

Outcome collect(Ticket& t) {
  Outcome o;
  JobEvent ev;
  for (;;) {
    if (!t.next(ev, 60s)) throw std::runtime_error("no event for a minute");
    o.text += ev.text;
    o.logprobs.insert(o.logprobs.end(), ev.logprobs.begin(), ev.logprobs.end());
    if (ev.kind != JobEvent::Kind::Text) {
      o.done = ev;
      return o;
    }
  }
}

class SchedulerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { engine_ = Engine::load(test::tiny_model_dir()).release(); }
  static void TearDownTestSuite() { delete engine_; }

  Job job(const std::string& user, uint64_t seed, int64_t max_tokens = 24) const {
    ChatRequest req;
    req.messages = {{{"role", "user"}, {"content", user}}};
    Job j;
    j.prompt = engine_->chat_prompt(req);
    j.params.sampling = engine_->default_sampling();
    j.params.sampling.seed = seed;
    if (seed % 3 == 0) j.params.sampling.temperature = 0;
    j.params.max_tokens = max_tokens;
    return j;
  }
  static Engine* engine_;
};
Engine* SchedulerTest::engine_ = nullptr;

TEST_F(SchedulerTest, ConcurrentStreamsEqualTheirSequentialRuns) {
  std::vector<Job> jobs;
  for (int i = 0; i < 16; ++i) jobs.push_back(job("question number " + std::to_string(i) + std::string(i * 7, '!'), i, 12 + i));
  std::vector<Outcome> alone;
  {
    SchedulerOptions opt;
    opt.cache_enabled = false;
    Scheduler s(*engine_, opt);
    for (const Job& j : jobs) alone.push_back(collect(*s.submit(j)));
  }
  SchedulerOptions opt;
  opt.cache_enabled = false;
  opt.max_sequences = 16;
  opt.prefill_chunk = 64;  // prompts are prefilled in several pieces between decode steps
  Scheduler s(*engine_, opt);
  std::vector<std::shared_ptr<Ticket>> tickets;
  for (const Job& j : jobs) tickets.push_back(s.submit(j));
  for (size_t i = 0; i < jobs.size(); ++i) {
    const Outcome o = collect(*tickets[i]);
    EXPECT_EQ(o.text, alone[i].text) << "request " << i;
    EXPECT_EQ(o.done.completion_tokens, alone[i].done.completion_tokens) << "request " << i;
    EXPECT_EQ(o.done.finish_reason, alone[i].done.finish_reason);
  }
  const auto st = s.stats();
  EXPECT_EQ(st.requests, 16u);
  EXPECT_LT(st.decode_steps, st.generated_tokens);  // steps were shared
}

TEST_F(SchedulerTest, ACachedPrefixGivesTheUncachedAnswer) {
  std::string shared;
  for (int i = 0; i < 120; ++i) shared += std::to_string(i * 37 % 101) + " ";
  Job first = job(shared + "a long shared system prompt", 3, 8);
  Job second = first;
  const auto extra = engine_->tokenizer().encode(" and a follow-up question");
  second.prompt.insert(second.prompt.end(), extra.begin(), extra.end());

  SchedulerOptions off;
  off.cache_enabled = false;
  Scheduler plain(*engine_, off);
  const Outcome want = collect(*plain.submit(second));
  EXPECT_EQ(want.done.cached_tokens, 0);

  Scheduler cached(*engine_, SchedulerOptions{});
  collect(*cached.submit(first));
  const Outcome got = collect(*cached.submit(second));
  const int64_t aligned = (static_cast<int64_t>(first.prompt.size()) - 1) / 64 * 64;
  EXPECT_EQ(got.done.cached_tokens, aligned);
  EXPECT_GT(aligned, 0);
  EXPECT_EQ(got.text, want.text);
  // the same request again resumes from the state saved inside its own prompt
  const Outcome again = collect(*cached.submit(second));
  EXPECT_EQ(again.done.cached_tokens, (static_cast<int64_t>(second.prompt.size()) - 1) / 64 * 64);
  EXPECT_EQ(again.text, want.text);
  const auto st = cached.stats();
  EXPECT_EQ(st.cache.hits, 2u);
  EXPECT_GT(st.cache.bytes, 0u);
}

TEST_F(SchedulerTest, CancellingStopsTheSequenceAndFreesIt) {
  Scheduler s(*engine_, SchedulerOptions{});
  auto t = s.submit(job("tell me everything", 1, 100000));
  JobEvent ev;
  ASSERT_TRUE(t->next(ev, 30s));
  t->cancel();
  const Outcome o = collect(*t);
  EXPECT_EQ(o.done.finish_reason, "cancelled");
  EXPECT_LT(o.done.completion_tokens, 100000);
  for (int i = 0; i < 100 && s.stats().running > 0; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(s.stats().running, 0u);
}

TEST_F(SchedulerTest, AFullQueueRefusesAndTimeoutsEnd) {
  SchedulerOptions opt;
  opt.max_sequences = 1;
  opt.max_queue = 1;
  Scheduler s(*engine_, opt);
  std::vector<std::shared_ptr<Ticket>> accepted;
  int refused = 0;
  for (int i = 0; i < 3; ++i) {
    try {
      accepted.push_back(s.submit(job("busy", i + 1, 100000)));
    } catch (const QueueFull& e) {
      ++refused;
      EXPECT_NE(std::string(e.what()).find("busy"), std::string::npos);
    }
  }
  EXPECT_GE(refused, 1);
  for (auto& t : accepted) t->cancel();
  for (auto& t : accepted) EXPECT_EQ(collect(*t).done.finish_reason, "cancelled");

  Job late = job("too late", 2);
  late.deadline = std::chrono::steady_clock::now() - 1s;
  EXPECT_EQ(collect(*s.submit(late)).done.finish_reason, "timeout");
  EXPECT_THROW(s.submit(Job{}), Error);
}

TEST_F(SchedulerTest, JsonObjectOutputStaysValidJson) {
  Scheduler s(*engine_, SchedulerOptions{});
  for (uint64_t seed : {3u, 4u, 5u}) {
    Job j = job("answer in JSON", seed, 40);
    j.params.json_object = true;
    const Outcome o = collect(*s.submit(j));
    JsonPrefix check;
    EXPECT_TRUE(check.push(o.text)) << o.text;
    EXPECT_EQ(o.text.substr(o.text.find_first_not_of(" \n\t\r"), 1), "{") << o.text;
    if (o.done.finish_reason == "stop") {
      EXPECT_TRUE(check.complete()) << o.text;
    }
  }
}

TEST_F(SchedulerTest, LogprobsComeWithEveryToken) {
  Scheduler s(*engine_, SchedulerOptions{});
  Job j = job("probabilities", 3, 6);
  j.params.top_logprobs = 3;
  const Outcome o = collect(*s.submit(j));
  ASSERT_EQ(static_cast<int64_t>(o.logprobs.size()), o.done.completion_tokens);
  for (const auto& lp : o.logprobs) {
    ASSERT_EQ(lp.top.size(), 3u);
    EXPECT_LE(lp.logprob, 0.f);
    EXPECT_GE(lp.top[0].second, lp.top[1].second);
    EXPECT_EQ(lp.top[0].first, lp.token);  // greedy picks the most likely token
  }
}

}  // namespace
}  // namespace lily
