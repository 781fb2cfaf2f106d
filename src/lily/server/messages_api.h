// Anthropic's Messages API (POST /v1/messages, /v1/messages/count_tokens):
// the request read into the chat form the engine runs (content blocks to
// messages, tool_result blocks to tool turns, input_schema tools to function
// tools, thinking to thinking on or off), and the answer given as a message
// of content blocks (thinking, text, tool_use) or streamed as the API's
// events (message_start, content_block_start/delta/stop, message_delta,
// message_stop).
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "lily/runtime/engine.h"
#include "lily/server/answer_blocks.h"
#include "lily/server/answer_format.h"
#include "lily/server/openai_request.h"

namespace lily::server {

// The request as the engine runs it. `count_only`: the body of
// count_tokens, where max_tokens is not needed.
ApiRequest parse_messages_request(const nlohmann::ordered_json& body, const Engine& engine,
                                  bool content_tokens_as_text = true, bool count_only = false);

class MessagesFormat : public AnswerFormat {
 public:
  MessagesFormat(std::shared_ptr<const ApiRequest> req, std::string model);

  std::string frames(const JobEvent& ev) override;
  std::string error_frames(const ApiError& e) override;
  nlohmann::ordered_json whole(const JobEvent& done) override;

 private:
  nlohmann::ordered_json block(size_t index, bool done) const;
  std::string stop_reason(const JobEvent& done) const;

  std::shared_ptr<const ApiRequest> req_;
  std::string model_, id_;
  AnswerBlocks blocks_;
  bool opened_ = false;
};

}  // namespace lily::server
