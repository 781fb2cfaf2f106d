// Reads an OpenAI request body (/v1/chat/completions, /v1/completions) into
// what the engine needs: the prompt, the sampling and stopping parameters,
// and what the answer's shape must be (tools, reasoning, JSON, log-probs).
// Every field is checked for type and range; a bad one is an ApiError (400)
// that names it. Unknown fields are ignored, as OpenAI's own server does.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "lily/runtime/continuation.h"
#include "lily/runtime/engine.h"

namespace lily::server {

enum class ToolChoice { Auto, None, Required, Named };

struct ApiRequest {
  bool chat = true;
  bool stream = false, include_usage = false;
  std::vector<int32_t> prompt;
  std::string prompt_text;
  std::optional<int64_t> max_tokens;  // as asked; the server fills in the rest of the context
  ContinuationParams params;
  bool logprobs = false;
  // chat only
  nlohmann::ordered_json tools;  // null, or the tools given to the template and the parser
  ToolChoice tool_choice = ToolChoice::Auto;
  std::string forced_function;   // with ToolChoice::Named
  std::string forced_prefix;     // answer text the prompt already ends with (a forced tool call)
  bool parallel_tool_calls = true;
  bool reasoning = true;         // the prompt opened <think>
};

// `body` is the parsed JSON; `defaults` the model's sampling defaults.
// `content_tokens_as_text`: see Engine::chat_prompt.
ApiRequest parse_chat_request(const nlohmann::ordered_json& body, const Engine& engine,
                              bool content_tokens_as_text = true);
ApiRequest parse_completion_request(const nlohmann::ordered_json& body, const Engine& engine);

// Reads the messages array into the template's form: text parts joined,
// system and developer messages merged into one leading system turn (agents
// send them mid-conversation), tool-call arguments given as JSON strings
// parsed into objects as the template expects.
nlohmann::ordered_json normalize_messages(const nlohmann::ordered_json& messages);

}  // namespace lily::server
