// One generation: prefill through a Session, then sample token by token
// until an end-of-turn id, a stop string, the token limit or a cancel, with
// the text streamed out as it becomes complete.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "lily/runtime/engine.h"
#include "lily/runtime/sampler.h"
#include "lily/runtime/session.h"

namespace lily {

struct GenerationRequest {
  std::vector<int32_t> prompt;
  size_t checkpoint_at = 0;  // position to keep a state checkpoint at (0: none)
  SamplingParams sampling;
  int64_t max_tokens = 256;
  std::vector<std::string> stop;
  const std::atomic<bool>* cancel = nullptr;  // set from another thread or a signal handler
};

struct GenerationResult {
  std::string text;                // everything streamed
  std::vector<int32_t> tokens;     // generated ids (the stop id included)
  std::string finish_reason;       // "stop", "length" or "cancelled"
  int64_t prompt_tokens = 0, reused_tokens = 0;
  double prefill_seconds = 0, decode_seconds = 0;
  int64_t verify_steps = 0;  // speculative decoding: forward steps that fed a token and its drafts
};

// `on_text` receives each newly complete piece of text; returning false cancels.
GenerationResult generate(const Engine& engine, Session& session, const GenerationRequest& req,
                          const std::function<bool(const std::string&)>& on_text);

}  // namespace lily
