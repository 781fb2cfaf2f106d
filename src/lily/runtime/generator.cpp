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
  const bool pick = cont.picks_anywhere();
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
  while (req.max_tokens > 0) {
    if (req.cancel && req.cancel->load()) {
      r.finish_reason = "cancelled";
      break;
    }
    Continuation::Step s = pick ? cont.picked(next) : cont.next(logits);
    if (!s.text.empty()) {
      r.text += s.text;
      if (!on_text(s.text)) {
        r.finish_reason = "cancelled";
        break;
      }
    }
    if (s.feed < 0) {
      r.finish_reason = s.finish_reason;
      break;
    }
    if (pick)
      next = session.step_pick(s.feed, cont.plan());
    else
      logits = session.step(s.feed);
  }
  r.tokens = cont.tokens();
  r.decode_seconds = std::chrono::duration<double>(clock::now() - t1).count();
  return r;
}

}  // namespace lily
