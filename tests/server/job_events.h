// What the server's API tests feed the answer formats: the bundled model's
// engine, and recorded job events (text as it arrives, then the end).
#pragma once

#include <string>

#include "lily/runtime/engine.h"
#include "lily/runtime/scheduler.h"
#include "support/test_support.h"

namespace lily::server::test_events {

inline const Engine& engine() {
  static auto e = Engine::load(test::tiny_model_dir());
  return *e;
}

inline JobEvent text(const std::string& s) {
  JobEvent e;
  e.text = s;
  return e;
}

// The end of a job of 10 prompt tokens (4 from the cache) and `completion`
// generated ones (ids 1, 2, 3 recorded).
inline JobEvent done(const std::string& reason, int64_t completion, const std::string& stop_sequence = "") {
  JobEvent e;
  e.kind = JobEvent::Kind::Done;
  e.finish_reason = reason;
  e.stop_sequence = stop_sequence;
  e.prompt_tokens = 10;
  e.cached_tokens = 4;
  e.completion_tokens = completion;
  e.generated = {1, 2, 3};
  return e;
}

}  // namespace lily::server::test_events
