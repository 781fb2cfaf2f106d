// A request body for /v1/chat/completions and /v1/completions, parsed as the
// server does (depth check, JSON, then the OpenAI fields against the bundled model).
#include "fuzz_support.h"
#include "lily/error.h"
#include "lily/io/bounded_input.h"
#include "lily/server/api_error.h"
#include "lily/server/openai_request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const auto engine = lily::Engine::load(lily::fuzz::bundled_model_dir());
  try {
    const auto body = lily::parse_ordered_json(lily::fuzz::text(data, size), "the request body");
    try {
      lily::server::parse_chat_request(body, *engine);
    } catch (const lily::server::ApiError&) {
    }
    try {
      lily::server::parse_completion_request(body, *engine);
    } catch (const lily::server::ApiError&) {
    }
  } catch (const lily::Error&) {
  }
  return 0;
}
