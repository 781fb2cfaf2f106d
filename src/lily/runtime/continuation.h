// What happens to one sequence's logits after each forward step: the token
// is drawn (under the request's constraint, if any), its text is decoded and
// checked against the stop strings, and the end is decided (an end-of-turn
// id, a stop string, the token limit, a finished JSON object). Shared by the
// single-sequence generator and the server's batched scheduler, so both end
// and stream a sequence the same way.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "lily/runtime/engine.h"
#include "lily/runtime/sampler.h"
#include "lily/runtime/stop_strings.h"
#include "lily/text/json_prefix.h"
#include "lily/text/stream_decoder.h"

namespace lily {

struct ContinuationParams {
  SamplingParams sampling;
  int64_t max_tokens = 256;
  std::vector<std::string> stop;
  int top_logprobs = -1;        // -1: no log-probabilities; 0..20: that many alternatives
  bool json_object = false;     // the answer must be one JSON object
  bool reasoning_open = false;  // the prompt opened <think>: the JSON starts after </think>
};

struct TokenLogprob {
  int32_t token;
  float logprob;
  std::vector<std::pair<int32_t, float>> top;  // most likely first
};

class Continuation {
 public:
  Continuation(const Engine& engine, const ContinuationParams& p, const std::vector<int32_t>& prompt);

  struct Step {
    int32_t feed = -1;   // the token to feed next, -1 when the sequence has ended
    std::string text;    // text now complete (stop strings held back and cut)
    std::optional<TokenLogprob> logprob;
    std::string finish_reason;  // set when ended: "stop" or "length"
    std::string stop_sequence;  // the user stop string that ended it, if one did
  };
  // Takes the logits of the last fed token (modified in place).
  Step next(std::vector<float>& logits);
  // Without a JSON constraint or log-probabilities nothing needs the logits
  // on the host: the backend can choose the token where they are, following
  // plan(), and picked() takes it in place of next().
  bool picks_anywhere() const;
  TokenPick plan();
  Step picked(int32_t token);

  int64_t generated() const { return generated_; }
  const std::vector<int32_t>& tokens() const { return tokens_; }

 private:
  Step accept(int32_t token);  // a token chosen and recorded: stops, text, length
  bool allowed(int32_t token) const;
  std::string flush();

  const Engine& engine_;
  ContinuationParams p_;
  Sampler sampler_;
  StreamDecoder decoder_;
  StopStrings stops_;
  std::optional<JsonPrefix> json_;
  bool in_reasoning_;
  std::string reasoning_tail_;  // the end of the reasoning so far, to see </think> across tokens
  int64_t generated_ = 0;
  std::vector<int32_t> tokens_;
};

}  // namespace lily
