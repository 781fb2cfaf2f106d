// The APIs `lily serve` speaks, told apart by path, and the shape each gives
// its errors: OpenAI's {"error": {message, type, param, code}} (Chat
// Completions and Responses), Anthropic's {"type": "error", "error": {type,
// message}} under /v1/messages, and Ollama's {"error": "..."} under /api/.
// A client parses errors in its own API's shape, so every error an endpoint
// can give (a bad field, a missing key, a body too large, an unknown path)
// goes out in that shape.
#pragma once

#include <nlohmann/json.hpp>
#include <string_view>

#include "lily/server/api_error.h"

namespace lily::server {

enum class Dialect { OpenAI, Anthropic, Ollama };

Dialect dialect_of(std::string_view path);

// The error body a client of `d` expects.
nlohmann::ordered_json error_body(Dialect d, const ApiError& e);

// The error type of an HTTP status in OpenAI's and Anthropic's vocabularies.
const char* openai_error_type(int status);
const char* anthropic_error_type(int status);

}  // namespace lily::server
