#include "lily/runtime/generator.h"

#include <algorithm>
#include <chrono>

#include "lily/runtime/stop_strings.h"
#include "lily/text/stream_decoder.h"

namespace lily {

GenerationResult generate(const Engine& engine, Session& session, const GenerationRequest& req,
                          const std::function<bool(const std::string&)>& on_text) {
  using clock = std::chrono::steady_clock;
  GenerationResult r;
  r.prompt_tokens = static_cast<int64_t>(req.prompt.size());
  Sampler sampler(req.sampling);
  sampler.set_context(req.prompt);
  StreamDecoder decoder(engine.tokenizer());
  StopStrings stops(req.stop);
  const auto& stop_ids = engine.stop_ids();
  auto emit = [&](const std::string& s) {
    if (s.empty()) return true;
    r.text += s;
    return on_text(s);
  };

  const auto t0 = clock::now();
  std::vector<float> logits = session.prefill(req.prompt, req.checkpoint_at);
  r.reused_tokens = static_cast<int64_t>(session.reused_tokens());
  const auto t1 = clock::now();
  r.prefill_seconds = std::chrono::duration<double>(t1 - t0).count();
  r.finish_reason = "length";
  for (int64_t i = 0; i < req.max_tokens; ++i) {
    if (req.cancel && req.cancel->load()) {
      r.finish_reason = "cancelled";
      break;
    }
    const int32_t tok = sampler.sample(logits);
    r.tokens.push_back(tok);
    if (std::find(stop_ids.begin(), stop_ids.end(), tok) != stop_ids.end()) {
      r.finish_reason = "stop";
      break;
    }
    if (!emit(stops.push(decoder.push(tok)))) {
      r.finish_reason = "cancelled";
      break;
    }
    if (stops.stopped()) {
      r.finish_reason = "stop";
      break;
    }
    if (i + 1 < req.max_tokens) logits = session.step(tok);
  }
  if (r.finish_reason != "cancelled" && !stops.stopped()) emit(stops.push(decoder.finish()) + stops.finish());
  r.decode_seconds = std::chrono::duration<double>(clock::now() - t1).count();
  return r;
}

}  // namespace lily
