// Everything needed to turn chat messages into an answer with one model:
// the weights, the tokenizer, the chat template, the generation defaults and
// the ids that end a turn.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "lily/backend/backend.h"
#include "lily/model/model.h"
#include "lily/runtime/sampler.h"
#include "lily/text/chat_template.h"
#include "lily/text/tokenizer.h"

namespace lily {

class Engine {
 public:
  // `path_or_repo`: a directory or a Hugging Face repo id in the local cache;
  // `backend`: where the model runs (the CPU when null).
  static std::unique_ptr<Engine> load(const std::string& path_or_repo, std::shared_ptr<Backend> backend = nullptr);

  const Model& model() const { return *model_; }
  const std::shared_ptr<Backend>& backend() const { return backend_; }
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  const ChatTemplate& chat_template() const { return *template_; }
  const SamplingParams& default_sampling() const { return defaults_; }
  const std::vector<int64_t>& stop_ids() const { return stop_ids_; }
  const std::string& dir() const { return dir_; }

  // Renders and tokenizes a chat request; throws lily::Error on template
  // errors. Only the template's own markup becomes control tokens: text in
  // the messages, tools and arguments that spells one (<|im_end|>, <think>,
  // <tool_call>, ...) is encoded as the text it is, so a file or tool result
  // cannot close a turn and write its own. `content_tokens_as_text = false`
  // restores the plain behaviour, where such text becomes the token.
  std::vector<int32_t> chat_prompt(const ChatRequest& req, std::string* text = nullptr,
                                   bool content_tokens_as_text = true) const;

 private:
  std::string dir_;
  std::unique_ptr<Model> model_;
  std::shared_ptr<Backend> backend_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<ChatTemplate> template_;
  SamplingParams defaults_;
  std::vector<int64_t> stop_ids_;
};

}  // namespace lily
