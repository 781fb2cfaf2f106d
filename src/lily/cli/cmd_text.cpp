// `lily template`, `lily tokenize`, `lily detokenize`: the text layer on its own.
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>

#include "lily/cli/commands.h"
#include "lily/error.h"
#include "lily/io/bounded_input.h"
#include "lily/io/model_locator.h"
#include "lily/text/chat_template.h"
#include "lily/text/tokenizer.h"
#include "lily/text/utf8.h"

namespace lily::cli {

namespace {
nlohmann::ordered_json read_json_file(const std::string& path, const char* what) {
  std::string text;
  try {
    text = read_regular_file(path, size_t(64) << 20);
    check_json_depth(text, path);
  } catch (const Error& e) {
    throw Error(std::string(what) + ": " + e.what());
  }
  try {
    return nlohmann::ordered_json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string(what) + ": " + path + " is not valid JSON: " + e.what());
  }
}

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& model) {
  return Tokenizer::load(locate_model(model) + "/tokenizer.json");
}

// "true", "false", numbers and JSON literals become JSON values; anything else a string.
nlohmann::ordered_json kwarg_value(const std::string& v) {
  try {
    return nlohmann::ordered_json::parse(v);
  } catch (const nlohmann::json::exception&) {
    return v;
  }
}
}  // namespace

Command add_template_command(CLI::App& app) {
  struct Opts {
    std::string model, messages, tools;
    std::vector<std::string> kwargs;
    bool no_generation_prompt = false;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* sub = app.add_subcommand("template", "print the prompt the chat template renders for a conversation");
  sub->add_option("--model", o->model, "model directory or Hugging Face repo id")->required();
  sub->add_option("--messages", o->messages, "JSON file with the list of messages")->required();
  sub->add_option("--tools", o->tools, "JSON file with the list of tools");
  sub->add_option("--kwarg", o->kwargs, "name=value passed to the template (repeatable)");
  sub->add_flag("--no-generation-prompt", o->no_generation_prompt, "do not open the assistant's turn");
  return {sub, [o]() {
            ChatRequest req;
            req.messages = read_json_file(o->messages, "--messages");
            if (!req.messages.is_array()) throw Error("--messages: " + o->messages + " must hold a JSON list of messages");
            if (!o->tools.empty()) req.tools = read_json_file(o->tools, "--tools");
            for (const auto& kv : o->kwargs) {
              const size_t eq = kv.find('=');
              if (eq == std::string::npos || eq == 0) throw Error("--kwarg: '" + kv + "' is not name=value");
              req.kwargs[kv.substr(0, eq)] = kwarg_value(kv.substr(eq + 1));
            }
            req.add_generation_prompt = !o->no_generation_prompt;
            std::cout << ChatTemplate::from_model_dir(locate_model(o->model))->render(req);
            return 0;
          }};
}

Command add_tokenize_command(CLI::App& app) {
  struct Opts {
    std::string model, text;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* sub = app.add_subcommand("tokenize", "print the token ids of a text as JSON");
  sub->add_option("--model", o->model, "model directory or Hugging Face repo id")->required();
  sub->add_option("--text", o->text, "the text")->required();
  return {sub, [o]() {
            const auto ids = load_tokenizer(o->model)->encode(o->text);
            std::cout << nlohmann::json(ids).dump() << "\n";
            return 0;
          }};
}

Command add_detokenize_command(CLI::App& app) {
  struct Opts {
    std::string model, tokens;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* sub = app.add_subcommand("detokenize", "print the text of token ids as a JSON string");
  sub->add_option("--model", o->model, "model directory or Hugging Face repo id")->required();
  sub->add_option("--tokens", o->tokens, "comma-separated token ids")->required();
  return {sub, [o]() {
            auto tok = load_tokenizer(o->model);
            const auto ids = parse_token_list(o->tokens);
            for (size_t i = 0; i < ids.size(); ++i)
              if (static_cast<size_t>(ids[i]) >= tok->vocab_size())
                throw Error("token id " + std::to_string(ids[i]) + " at position " + std::to_string(i) +
                            " is outside the vocabulary (0.." + std::to_string(tok->vocab_size() - 1) + ")");
            std::cout << nlohmann::json(replace_invalid_utf8(tok->decode_bytes(ids))).dump() << "\n";
            return 0;
          }};
}

}  // namespace lily::cli
