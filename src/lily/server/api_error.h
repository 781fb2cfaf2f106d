// An error answered to an API client: the HTTP status and OpenAI's error
// object, {"error": {"message", "type", "param", "code"}}.
#pragma once

#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

namespace lily::server {

class ApiError : public std::runtime_error {
 public:
  ApiError(int status, std::string message, std::string type = "invalid_request_error", std::string param = "")
      : std::runtime_error(message), status_(status), type_(std::move(type)), param_(std::move(param)) {}
  int status() const { return status_; }
  nlohmann::ordered_json body() const {
    nlohmann::ordered_json e = {{"message", what()}, {"type", type_}, {"param", nullptr}, {"code", nullptr}};
    if (!param_.empty()) e["param"] = param_;
    return {{"error", e}};
  }

 private:
  int status_;
  std::string type_, param_;
};

// 400 for a bad field, naming it.
inline ApiError bad_field(const std::string& param, const std::string& message) {
  return ApiError(400, "'" + param + "': " + message, "invalid_request_error", param);
}

// Runs a request parser: a field of an unexpected JSON type that a check
// missed is still the client's error (400), never the server's.
template <class Parse>
auto json_type_errors_as_400(Parse&& parse) -> decltype(parse()) {
  try {
    return parse();
  } catch (const nlohmann::ordered_json::exception& e) {
    throw ApiError(400, std::string("a field of the request has the wrong type: ") + e.what());
  }
}

}  // namespace lily::server
