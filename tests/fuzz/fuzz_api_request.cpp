// A request body as every generation endpoint reads it: the depth check and
// JSON parse the server does, then the fields of each API (Chat Completions,
// Completions, Responses, Messages and count_tokens, Ollama's chat and
// generate) against the bundled model. Any error must be an ApiError (a 4xx
// answer) or lily::Error; anything else escaping is a finding.
#include "fuzz_support.h"
#include "lily/error.h"
#include "lily/io/bounded_input.h"
#include "lily/server/api_error.h"
#include "lily/server/messages_api.h"
#include "lily/server/ollama_api.h"
#include "lily/server/openai_request.h"
#include "lily/server/responses_api.h"

namespace {
template <class Parse>
void refused_or_read(Parse&& parse) {
  try {
    parse();
  } catch (const lily::server::ApiError&) {
  }
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace lily::server;
  static const auto engine = lily::Engine::load(lily::fuzz::bundled_model_dir());
  static ResponseStore store(4, 1 << 20);
  try {
    const auto body = lily::parse_ordered_json(lily::fuzz::text(data, size), "the request body");
    refused_or_read([&] { parse_chat_request(body, *engine); });
    refused_or_read([&] { parse_completion_request(body, *engine); });
    refused_or_read([&] { parse_responses_request(body, *engine, store); });
    refused_or_read([&] { parse_messages_request(body, *engine); });
    refused_or_read([&] { parse_messages_request(body, *engine, true, true); });
    refused_or_read([&] { parse_ollama_chat(body, *engine); });
    refused_or_read([&] { parse_ollama_generate(body, *engine); });
  } catch (const lily::Error&) {
  }
  return 0;
}
