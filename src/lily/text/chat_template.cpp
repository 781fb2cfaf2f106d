#include "lily/text/chat_template.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "lily/error.h"
#include "lily/io/bounded_input.h"
#include "lily/text/jinja/interpreter.h"
#include "lily/text/jinja/parser.h"

namespace lily {

namespace fs = std::filesystem;
using nlohmann::ordered_json;

namespace {
// tokenizer_config.json may hold the template; both are far below this.
constexpr size_t kMaxTemplateFileBytes = size_t(16) << 20;
std::string slurp(const fs::path& p) { return read_regular_file(p.string(), kMaxTemplateFileBytes); }
std::string token_text(const ordered_json& cfg, const char* key) {
  if (!cfg.contains(key)) return "";
  const auto& v = cfg[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
  return "";
}
}  // namespace

ChatTemplate::ChatTemplate(const std::string& source, std::string bos, std::string eos)
    : source_(source), bos_(std::move(bos)), eos_(std::move(eos)) {
  try {
    tmpl_ = jinja::parse_template(source);
  } catch (const Error& e) {
    throw Error(std::string("chat template: ") + e.what());
  }
}

std::unique_ptr<ChatTemplate> ChatTemplate::from_model_dir(const std::string& dir) {
  ordered_json cfg = ordered_json::object();
  const fs::path cfg_path = fs::path(dir) / "tokenizer_config.json";
  if (fs::exists(cfg_path)) {
    cfg = parse_ordered_json(slurp(cfg_path), cfg_path.string());
    if (!cfg.is_object()) throw Error(cfg_path.string() + ": not a JSON object");
  }
  std::string source;
  const fs::path jinja_path = fs::path(dir) / "chat_template.jinja";
  if (fs::exists(jinja_path)) {
    source = slurp(jinja_path);
  } else if (cfg.contains("chat_template") && cfg["chat_template"].is_string()) {
    source = cfg["chat_template"].get<std::string>();
  } else if (cfg.contains("chat_template") && cfg["chat_template"].is_array()) {
    for (const auto& e : cfg["chat_template"])
      if (e.is_object() && e.contains("name") && e["name"] == "default" && e.contains("template") &&
          e["template"].is_string())
        source = e["template"].get<std::string>();
  }
  if (source.empty()) throw Error(dir + ": no chat template (chat_template.jinja or tokenizer_config.json chat_template)");
  return std::make_unique<ChatTemplate>(source, token_text(cfg, "bos_token"), token_text(cfg, "eos_token"));
}

std::string ChatTemplate::render(const ChatRequest& req, const std::function<std::string(std::string_view)>& mark_text) const {
  jinja::Object ctx;
  ctx.set("messages", jinja::Value::from_json(req.messages, mark_text));
  if (!req.tools.is_null()) ctx.set("tools", jinja::Value::from_json(req.tools, mark_text));
  else ctx.set("tools", jinja::Value::none());
  ctx.set("add_generation_prompt", jinja::Value(req.add_generation_prompt));
  ctx.set("bos_token", jinja::Value(bos_));
  ctx.set("eos_token", jinja::Value(eos_));
  for (auto it = req.kwargs.begin(); it != req.kwargs.end(); ++it) ctx.set(it.key(), jinja::Value::from_json(it.value(), mark_text));
  try {
    return jinja::render(*tmpl_, ctx);
  } catch (const jinja::TemplateRaised& e) {
    throw Error(std::string("chat template error: ") + e.what());
  }
}

}  // namespace lily
