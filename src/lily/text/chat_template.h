// A model's chat template, rendered the way transformers' apply_chat_template
// does: messages, tools, add_generation_prompt, the tokenizer's special
// tokens and extra keyword arguments (enable_thinking, preserve_thinking, ...).
#pragma once

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace lily {
namespace jinja {
struct Template;
}

struct ChatRequest {
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  nlohmann::ordered_json tools;  // null when there are none
  bool add_generation_prompt = true;
  nlohmann::ordered_json kwargs = nlohmann::ordered_json::object();  // extra template variables
};

class ChatTemplate {
 public:
  // Parses `source`; throws lily::Error on a syntax error.
  ChatTemplate(const std::string& source, std::string bos_token, std::string eos_token);
  // From a model directory: chat_template.jinja, else tokenizer_config.json's chat_template.
  static std::unique_ptr<ChatTemplate> from_model_dir(const std::string& dir);

  // Throws lily::Error; for the template's own raise_exception() the message
  // is "chat template error: <its message>". `mark_text`, when given, is
  // applied to every string of the messages, tools and keyword arguments
  // (Tokenizer::mark_as_text keeps their text from becoming control tokens).
  std::string render(const ChatRequest& req, const std::function<std::string(std::string_view)>& mark_text = {}) const;

  // The template's text, as read (shown by APIs that describe the model).
  const std::string& source() const { return source_; }

 private:
  std::shared_ptr<jinja::Template> tmpl_;
  std::string source_, bos_, eos_;
};

}  // namespace lily
