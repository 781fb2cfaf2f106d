// A chat template from a checkpoint, rendered over a conversation with tools.
#include "fuzz_support.h"
#include "lily/error.h"
#include "lily/text/chat_template.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const lily::ChatRequest req = [] {
    lily::ChatRequest r;
    r.messages = nlohmann::ordered_json::parse(R"([
      {"role": "system", "content": "Be brief."},
      {"role": "user", "content": "Weather in Paris?"},
      {"role": "assistant", "content": "", "reasoning_content": "use the tool",
       "tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
      {"role": "tool", "content": "{\"temp\": 21}"},
      {"role": "user", "content": [{"type": "text", "text": "Thanks"}]}])");
    r.tools = nlohmann::ordered_json::parse(R"([{"type": "function", "function": {"name": "get_weather",
      "description": "Current weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}])");
    r.kwargs["enable_thinking"] = true;
    return r;
  }();
  try {
    lily::ChatTemplate t(std::string(lily::fuzz::text(data, size)), "<s>", "</s>");
    t.render(req);
  } catch (const lily::Error&) {
  }
  return 0;
}
