// OpenAI's Responses API (POST /v1/responses): the request read into the
// chat form the engine runs (input items to messages, flat function tools to
// nested ones, reasoning effort to thinking on or off), and the answer given
// as a response object with output items (reasoning, message, function_call)
// or streamed as the API's typed events (response.created,
// response.output_item.added, response.output_text.delta, ...,
// response.completed). Finished responses are stored for
// previous_response_id unless the request says store: false.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "lily/runtime/engine.h"
#include "lily/server/answer_blocks.h"
#include "lily/server/answer_format.h"
#include "lily/server/openai_request.h"
#include "lily/server/response_store.h"

namespace lily::server {

struct ResponsesRequest {
  ApiRequest api;                       // what the engine runs
  nlohmann::ordered_json conversation;  // the messages without the instructions (kept for follow-ups)
  nlohmann::ordered_json echo;          // the request's settings the response object repeats
  std::string previous_response_id;
  bool store = true;
};

// The input items as Chat Completions messages; throws ApiError naming the
// item at fault.
nlohmann::ordered_json responses_input_to_messages(const nlohmann::ordered_json& input);

// `store` holds the responses previous_response_id may name.
ResponsesRequest parse_responses_request(const nlohmann::ordered_json& body, const Engine& engine, ResponseStore& store,
                                         bool content_tokens_as_text = true);

class ResponsesFormat : public AnswerFormat {
 public:
  ResponsesFormat(std::shared_ptr<const ResponsesRequest> req, const Engine& engine, std::string model,
                  ResponseStore* store);

  std::string frames(const JobEvent& ev) override;
  std::string error_frames(const ApiError& e) override;
  nlohmann::ordered_json whole(const JobEvent& done) override;

 private:
  std::string event(const std::string& type, nlohmann::ordered_json fields);
  nlohmann::ordered_json response_object(const std::string& status, const JobEvent* done) const;
  nlohmann::ordered_json item(size_t index, bool done) const;
  nlohmann::ordered_json part(size_t index) const;
  void finish(const JobEvent& done);

  std::shared_ptr<const ResponsesRequest> req_;
  const Engine& engine_;
  std::string model_, id_;
  int64_t created_;
  ResponseStore* store_;
  AnswerBlocks blocks_;
  bool opened_ = false;
  int64_t sequence_ = 0;
  nlohmann::ordered_json final_;  // the finished response object
};

}  // namespace lily::server
