#include "lily/runtime/engine.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "lily/error.h"
#include "lily/io/bounded_input.h"
#include "lily/model/gguf_binding.h"
#include "lily/backend/backend_factory.h"
#include "lily/io/model_locator.h"

namespace lily {

namespace fs = std::filesystem;

std::unique_ptr<Engine> Engine::load(const std::string& path_or_repo, std::shared_ptr<Backend> backend) {
  auto e = std::make_unique<Engine>();
  e->dir_ = locate_model(path_or_repo);
  std::error_code ec;
  const bool gguf = fs::is_regular_file(e->dir_, ec);  // a GGUF file: tokenizer and template come from its metadata
  const fs::path tok = fs::path(e->dir_) / "tokenizer.json";
  if (!gguf && !fs::exists(tok)) throw Error(e->dir_ + ": no tokenizer.json (needed to turn text into tokens)");
  e->model_ = Model::load(e->dir_);
  e->backend_ = backend ? std::move(backend) : make_backend(Device::Cpu);
  const ModelConfig& c = e->model_->config();

  auto add = [&](int64_t id) {
    if (id >= 0 && std::find(e->stop_ids_.begin(), e->stop_ids_.end(), id) == e->stop_ids_.end()) e->stop_ids_.push_back(id);
  };
  if (gguf) {
    e->tokenizer_ = Tokenizer::from_json_text(gguf_tokenizer_json(*e->model_->gguf()), e->dir_ + " (GGUF tokenizer)");
    auto token_text = [&](int64_t id) {
      return id >= 0 && id < static_cast<int64_t>(e->tokenizer_->vocab_size())
                 ? e->tokenizer_->token_bytes(static_cast<int32_t>(id))
                 : std::string();
    };
    const std::string tmpl = gguf_chat_template(*e->model_->gguf());
    e->template_ = std::make_unique<ChatTemplate>(
        tmpl.empty() ? std::string("{{ raise_exception('this GGUF file has no tokenizer.chat_template') }}") : tmpl,
        token_text(c.bos_token_id), c.eos_token_ids.empty() ? std::string() : token_text(c.eos_token_ids[0]));
  } else {
    e->tokenizer_ = Tokenizer::load(tok.string());
    e->template_ = ChatTemplate::from_model_dir(e->dir_);
    e->defaults_ = SamplingParams::from_generation_config(e->dir_);
    const fs::path gen = fs::path(e->dir_) / "generation_config.json";
    if (fs::exists(gen)) {
      const auto j = parse_json(read_regular_file(gen.string(), SamplingParams::kMaxGenerationConfigBytes), gen.string());
      if (j.is_object() && j.contains("eos_token_id")) {
        if (j["eos_token_id"].is_number_integer()) add(j["eos_token_id"].get<int64_t>());
        if (j["eos_token_id"].is_array())
          for (const auto& x : j["eos_token_id"])
            if (x.is_number_integer()) add(x.get<int64_t>());
      }
    }
    if (e->tokenizer_->eos_token)
      if (auto id = e->tokenizer_->token_id(*e->tokenizer_->eos_token)) add(*id);
  }
  for (int64_t id : c.eos_token_ids) add(id);
  // A GGUF file without an end-of-sequence id still ends its turns.
  if (gguf && e->stop_ids_.empty())
    if (auto id = e->tokenizer_->token_id("<|im_end|>")) add(*id);
  return e;
}

std::vector<int32_t> Engine::chat_prompt(const ChatRequest& req, std::string* text, bool content_tokens_as_text) const {
  if (!content_tokens_as_text) {
    const std::string rendered = template_->render(req);
    if (text) *text = rendered;
    return tokenizer_->encode(rendered);
  }
  const std::string rendered =
      template_->render(req, [this](std::string_view s) { return tokenizer_->mark_as_text(s); });
  if (text) *text = tokenizer_->unmark(rendered);
  return tokenizer_->encode_marked(rendered);
}

}  // namespace lily
