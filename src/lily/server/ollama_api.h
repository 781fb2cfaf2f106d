// Ollama's API (/api/chat, /api/generate and the model listing endpoints):
// the requests read into what the engine runs (options to the sampler, think
// to thinking on or off, format "json" to JSON mode), and the answers given
// whole or streamed as NDJSON lines, Ollama's default. /api/generate hands
// back the conversation's token ids as `context`, and a request that sends
// them continues from them.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "lily/runtime/engine.h"
#include "lily/server/answer_format.h"
#include "lily/server/openai_request.h"
#include "lily/text/output_parser.h"

namespace lily::server {

ApiRequest parse_ollama_chat(const nlohmann::ordered_json& body, const Engine& engine,
                             bool content_tokens_as_text = true);
// `raw`: the prompt goes to the model as it is, without the chat template.
ApiRequest parse_ollama_generate(const nlohmann::ordered_json& body, const Engine& engine,
                                 bool content_tokens_as_text = true);

class OllamaFormat : public AnswerFormat {
 public:
  // `chat`: /api/chat, else /api/generate.
  OllamaFormat(std::shared_ptr<const ApiRequest> req, std::string model, bool chat);

  std::string frames(const JobEvent& ev) override;
  std::string error_frames(const ApiError& e) override;
  nlohmann::ordered_json whole(const JobEvent& done) override;
  const char* stream_content_type() const override { return "application/x-ndjson"; }

 private:
  nlohmann::ordered_json line(const ParsedDelta& d) const;
  nlohmann::ordered_json final_line(const JobEvent& done) const;

  std::shared_ptr<const ApiRequest> req_;
  std::string model_;
  bool chat_;
  OutputParser parser_;
  ParsedDelta all_;  // the whole answer
};

// What the listing endpoints say about the loaded model.
nlohmann::ordered_json ollama_model_entry(const Engine& engine, const std::string& name);
nlohmann::ordered_json ollama_show(const Engine& engine, const std::string& name, int64_t context);

// An Ollama model name names this server's model: its name, with or without a tag ":latest".
bool ollama_name_matches(const std::string& asked, const std::string& served);

}  // namespace lily::server
