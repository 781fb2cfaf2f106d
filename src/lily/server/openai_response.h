// Turns a job's events into OpenAI's answers: the chunks of a stream
// (chat.completion.chunk / text_completion) as text arrives, or one
// response at the end. For chat, the text goes through the output parser:
// thinking becomes reasoning_content, Qwen's XML tool calls become tool_calls
// with JSON-string arguments, and finish_reason says tool_calls when the
// answer ended in calls.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "lily/runtime/scheduler.h"
#include "lily/server/answer_format.h"
#include "lily/server/openai_request.h"
#include "lily/text/output_parser.h"

namespace lily::server {

class AnswerBuilder : public AnswerFormat {
 public:
  AnswerBuilder(const ApiRequest& req, const Engine& engine, std::string model_name);

  // AnswerFormat: the chunks as `data:` events, the stream ended by [DONE].
  std::string frames(const JobEvent& ev) override;
  std::string error_frames(const ApiError& e) override;
  nlohmann::ordered_json whole(const JobEvent& done) override { return response(done); }

  // The stream chunks an event makes (possibly none). The first call also
  // gives the chunk that opens the assistant's message.
  std::vector<nlohmann::ordered_json> chunks(const JobEvent& ev);
  // The chunks that close a stream after the Done event: the finish reason,
  // then the usage when asked for.
  std::vector<nlohmann::ordered_json> closing_chunks(const JobEvent& done);
  // The whole response, after the Done event has been passed to chunks().
  nlohmann::ordered_json response(const JobEvent& done);

  const std::string& id() const { return id_; }

 private:
  nlohmann::ordered_json chunk(nlohmann::ordered_json delta_or_choice_fields) const;
  nlohmann::ordered_json logprob_entries(const std::vector<TokenLogprob>& lps) const;
  nlohmann::ordered_json usage(const JobEvent& done) const;
  // Prompt and decode speed as llama.cpp's server reports them (its web UI and
  // Lily's read "timings" beside "usage").
  static nlohmann::ordered_json timings(const JobEvent& done);
  std::string finish_reason(const JobEvent& done) const;
  void take(const ParsedDelta& d, nlohmann::ordered_json& delta);

  const ApiRequest& req_;
  const Engine& engine_;
  std::string model_, id_;
  int64_t created_;
  OutputParser parser_;
  bool opened_ = false;
  // the whole answer so far
  std::string reasoning_, content_;
  std::vector<ToolCall> calls_;
  std::vector<TokenLogprob> logprobs_;
};

// A fresh random id with `prefix` ("chatcmpl-", "call_", ...).
std::string random_id(const std::string& prefix);

}  // namespace lily::server
