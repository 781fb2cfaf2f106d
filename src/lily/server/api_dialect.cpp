#include "lily/server/api_dialect.h"

namespace lily::server {

Dialect dialect_of(std::string_view path) {
  if (path == "/v1/messages" || path.rfind("/v1/messages/", 0) == 0) return Dialect::Anthropic;
  if (path == "/api" || path.rfind("/api/", 0) == 0) return Dialect::Ollama;
  return Dialect::OpenAI;
}

const char* openai_error_type(int status) {
  if (status == 401) return "authentication_error";
  if (status == 408 || status == 504) return "timeout_error";
  if (status >= 500) return "server_error";
  return "invalid_request_error";
}

const char* anthropic_error_type(int status) {
  switch (status) {
    case 401:
      return "authentication_error";
    case 403:
      return "permission_error";
    case 404:
      return "not_found_error";
    case 413:
      return "request_too_large";
    case 429:
      return "rate_limit_error";
    case 503:
      return "overloaded_error";
    case 504:
      return "timeout_error";
    default:
      return status >= 500 ? "api_error" : "invalid_request_error";
  }
}

nlohmann::ordered_json error_body(Dialect d, const ApiError& e) {
  switch (d) {
    case Dialect::Anthropic:
      return {{"type", "error"}, {"error", {{"type", anthropic_error_type(e.status())}, {"message", e.what()}}}};
    case Dialect::Ollama:
      return {{"error", e.what()}};
    case Dialect::OpenAI:
      break;
  }
  return e.body();
}

}  // namespace lily::server
