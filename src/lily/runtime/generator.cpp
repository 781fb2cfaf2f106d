#include "lily/runtime/generator.h"

#include <chrono>

#include "lily/runtime/continuation.h"

namespace lily {

GenerationResult generate(const Engine& engine, Session& session, const GenerationRequest& req,
                          const std::function<bool(const std::string&)>& on_text) {
  using clock = std::chrono::steady_clock;
  GenerationResult r;
  r.prompt_tokens = static_cast<int64_t>(req.prompt.size());
  ContinuationParams cp;
  cp.sampling = req.sampling;
  cp.max_tokens = req.max_tokens;
  cp.stop = req.stop;
  Continuation cont(engine, cp, req.prompt);

  // Where nothing needs the logits on the host, the backend picks each token
  // where they are (on a GPU only the id comes back).
  const bool pick = cont.picks_anywhere() && session.mtp() == 0;
  const auto t0 = clock::now();
  std::vector<float> logits;
  int32_t next = -1;
  if (pick)
    next = session.prefill_pick(req.prompt, req.checkpoint_at, cont.plan());
  else
    logits = session.prefill(req.prompt, req.checkpoint_at);
  r.reused_tokens = static_cast<int64_t>(session.reused_tokens());
  const auto t1 = clock::now();
  r.prefill_seconds = std::chrono::duration<double>(t1 - t0).count();
  r.finish_reason = "length";
  // Speculative decoding: a verify step hands out a row of logits per draft;
  // the token chosen from row i (chosen as it would be without drafts, the
  // random draws included) stands, and the next row is read only while the
  // chosen token is the draft that row followed.
  std::vector<int32_t> drafts;
  std::vector<float> rows;
  size_t row = 0;
  auto take_row = [&] {
    const size_t V = static_cast<size_t>(session.model().config().vocab_size);
    logits.assign(rows.begin() + static_cast<std::ptrdiff_t>(row * V), rows.begin() + static_cast<std::ptrdiff_t>((row + 1) * V));
  };
  // the rows of a verify step that were read stay consumed, the rest go back
  auto settle = [&] {
    if (!rows.empty()) session.accept(static_cast<int64_t>(row) + 1);
    rows.clear();
  };
  while (req.max_tokens > 0) {
    if (req.cancel && req.cancel->load()) {
      settle();
      r.finish_reason = "cancelled";
      break;
    }
    Continuation::Step s = pick ? cont.picked(next) : cont.next(logits);
    if (!s.text.empty()) {
      r.text += s.text;
      if (!on_text(s.text)) {
        settle();
        r.finish_reason = "cancelled";
        break;
      }
    }
    if (s.feed < 0) {
      settle();
      r.finish_reason = s.finish_reason;
      break;
    }
    if (!rows.empty()) {
      if (row < drafts.size() && s.feed == drafts[row]) {
        ++row;
        take_row();
        continue;
      }
      settle();
    }
    if (pick) {
      next = session.step_pick(s.feed, cont.plan());
    } else if (session.mtp() > 0) {
      rows = session.speculate(s.feed, &drafts);
      row = 0;
      take_row();
      ++r.verify_steps;
    } else {
      logits = session.step(s.feed);
    }
  }
  r.tokens = cont.tokens();
  r.decode_seconds = std::chrono::duration<double>(clock::now() - t1).count();
  return r;
}

}  // namespace lily
