#include "lily/server/ollama_api.h"

#include <cstdio>

#include "lily/server/openai_response.h"
#include "lily/server/request_fields.h"

namespace lily::server {

using json = nlohmann::ordered_json;

namespace {

// The fields /api/chat and /api/generate share, into a Chat Completions body.
void common(const json& body, json& chat) {
  if (!body.is_object()) throw ApiError(400, "the request body must be a JSON object");
  const json* stream = field(body, "stream");
  if (stream && !stream->is_boolean()) throw bad_field("stream", "must be true or false");
  chat["stream"] = stream ? stream->get<bool>() : true;  // Ollama streams unless told not to
  if (const json* o = field(body, "options")) {
    if (!o->is_object()) throw bad_field("options", "must be an object");
    // the sampler's options under their Chat Completions names; the others
    // (num_ctx, num_gpu, num_thread, ...) are the server's to decide
    static const std::pair<const char*, const char*> kNames[] = {{"temperature", "temperature"},
                                                                 {"top_p", "top_p"},
                                                                 {"top_k", "top_k"},
                                                                 {"min_p", "min_p"},
                                                                 {"seed", "seed"},
                                                                 {"repeat_penalty", "repetition_penalty"},
                                                                 {"presence_penalty", "presence_penalty"},
                                                                 {"frequency_penalty", "frequency_penalty"},
                                                                 {"stop", "stop"}};
    for (const auto& [from, to] : kNames)
      if (const json* v = field(*o, from)) chat[to] = *v;
    if (const json* v = field(*o, "num_predict")) {
      if (!v->is_number_integer()) throw bad_field("options.num_predict", "must be an integer");
      const int64_t n = v->get<int64_t>();
      if (n == 0 || n < -2) throw bad_field("options.num_predict", "must be positive, or -1 for no limit");
      if (n > 0) chat["max_tokens"] = n;
    }
  }
  if (const json* f = field(body, "format")) {
    if (f->is_string() && f->get<std::string>() == "json")
      chat["response_format"] = {{"type", "json_object"}};
    else if (f->is_object())
      throw ApiError(400, "'format': a JSON schema is not supported yet; use \"json\"", "invalid_request_error",
                     "format");
    else if (!(f->is_string() && f->get<std::string>().empty()))
      throw bad_field("format", "must be \"json\"");
  }
  if (const json* t = field(body, "think")) {
    if (t->is_boolean())
      chat["chat_template_kwargs"] = {{"enable_thinking", t->get<bool>()}};
    else if (t->is_string() && (*t == "low" || *t == "medium" || *t == "high"))
      chat["chat_template_kwargs"] = {{"enable_thinking", true}};
    else
      throw bad_field("think", "must be true, false, \"low\", \"medium\" or \"high\"");
  }
  if (const json* k = field(body, "keep_alive"); k && !k->is_string() && !k->is_number())
    throw bad_field("keep_alive", "must be a duration string or a number of seconds");
}

// Renames a Chat Completions field in an error to the Ollama one.
template <class F>
ApiRequest with_ollama_names(F&& parse) {
  try {
    return parse();
  } catch (const ApiError& e) {
    std::string msg = e.what();
    for (const auto& [from, to] : {std::pair<std::string, std::string>{"'max_tokens'", "'options.num_predict'"},
                                   {"'repetition_penalty'", "'options.repeat_penalty'"}})
      if (auto at = msg.find(from); at != std::string::npos) msg.replace(at, from.size(), to);
    throw ApiError(e.status(), msg);
  }
}

}  // namespace

namespace {
ApiRequest parse_ollama_chat_fields(const json& body, const Engine& engine, bool content_tokens_as_text) {
  json chat = json::object();
  common(body, chat);
  const json* msgs = field(body, "messages");
  if (!msgs || !msgs->is_array() || msgs->empty()) throw bad_field("messages", "must be a non-empty array");
  json messages = json::array();
  for (size_t i = 0; i < msgs->size(); ++i) {
    const json& m = (*msgs)[i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) throw bad_field(where, "must be an object");
    if (const json* im = field(m, "images"); im && !(im->is_array() && im->empty()))
      throw bad_field(where + ".images", "images are not supported: this model reads text only");
    json msg = {{"role", m.contains("role") ? m["role"] : json()},
                {"content", m.contains("content") ? m["content"] : json("")}};
    if (!msg["content"].is_string()) throw bad_field(where + ".content", "must be a string");
    if (const json* t = field(m, "thinking")) msg["reasoning_content"] = *t;
    if (const json* c = field(m, "tool_calls")) msg["tool_calls"] = *c;
    if (const json* n = field(m, "tool_name")) msg["tool_call_id"] = *n;
    messages.push_back(std::move(msg));
  }
  chat["messages"] = messages;
  if (const json* t = field(body, "tools")) chat["tools"] = *t;
  return with_ollama_names([&] { return parse_chat_request(chat, engine, content_tokens_as_text); });
}
}  // namespace

ApiRequest parse_ollama_chat(const json& body, const Engine& engine, bool content_tokens_as_text) {
  return json_type_errors_as_400([&] { return parse_ollama_chat_fields(body, engine, content_tokens_as_text); });
}

namespace {
ApiRequest parse_ollama_generate_fields(const json& body, const Engine& engine, bool content_tokens_as_text) {
  json req = json::object();
  common(body, req);
  const json* p = field(body, "prompt");
  if (p && !p->is_string()) throw bad_field("prompt", "must be a string");
  const std::string prompt = p ? p->get<std::string>() : "";
  if (const json* s = field(body, "suffix"); s && !(s->is_string() && s->get<std::string>().empty()))
    throw bad_field("suffix", "fill-in-the-middle is not supported by this model");
  if (const json* im = field(body, "images"); im && !(im->is_array() && im->empty()))
    throw bad_field("images", "images are not supported: this model reads text only");
  if (const json* t = field(body, "template"); t && !(t->is_string() && t->get<std::string>().empty()))
    throw bad_field("template", "a per-request template is not supported; the model's own is used");
  const json* raw = field(body, "raw");
  if (raw && !raw->is_boolean()) throw bad_field("raw", "must be true or false");
  const bool is_raw = raw && raw->get<bool>();

  std::vector<int32_t> context;
  if (const json* c = field(body, "context")) {
    const int64_t V = engine.model().config().vocab_size;
    if (!c->is_array()) throw bad_field("context", "must be an array of token ids");
    for (const auto& t : *c) {
      if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= V)
        throw bad_field("context", "token ids must be integers from 0 to " + std::to_string(V - 1));
      context.push_back(t.get<int32_t>());
    }
  }
  ApiRequest r;
  if (is_raw) {
    if (prompt.empty() && context.empty()) throw bad_field("prompt", "is empty");
    if (prompt.empty()) {
      req["prompt"] = context;  // continue from the context alone
      context.clear();
    } else {
      req["prompt"] = prompt;
    }
    req.erase("chat_template_kwargs");
    r = with_ollama_names([&] { return parse_completion_request(req, engine); });
  } else {
    json messages = json::array();
    if (const json* s = field(body, "system")) {
      if (!s->is_string()) throw bad_field("system", "must be a string");
      messages.push_back({{"role", "system"}, {"content", *s}});
    }
    messages.push_back({{"role", "user"}, {"content", prompt}});
    req["messages"] = messages;
    r = with_ollama_names([&] { return parse_chat_request(req, engine, content_tokens_as_text); });
  }
  r.prompt.insert(r.prompt.begin(), context.begin(), context.end());
  return r;
}
}  // namespace

ApiRequest parse_ollama_generate(const json& body, const Engine& engine, bool content_tokens_as_text) {
  return json_type_errors_as_400([&] { return parse_ollama_generate_fields(body, engine, content_tokens_as_text); });
}

OllamaFormat::OllamaFormat(std::shared_ptr<const ApiRequest> req, std::string model, bool chat)
    : req_(std::move(req)), model_(std::move(model)), chat_(chat), parser_(req_->reasoning, req_->tools) {}

json OllamaFormat::line(const ParsedDelta& d) const {
  json out = {{"model", model_}, {"created_at", rfc3339_now()}};
  if (chat_) {
    json msg = {{"role", "assistant"}, {"content", d.content}};
    if (!d.reasoning.empty()) msg["thinking"] = d.reasoning;
    if (!d.tool_calls.empty()) {
      json calls = json::array();
      for (const ToolCall& c : d.tool_calls)
        calls.push_back({{"id", random_id("call_")},
                         {"function", {{"index", calls.size()}, {"name", c.name}, {"arguments", c.arguments}}}});
      msg["tool_calls"] = calls;
    }
    out["message"] = msg;
  } else {
    out["response"] = d.content;
    if (!d.reasoning.empty()) out["thinking"] = d.reasoning;
  }
  out["done"] = false;
  return out;
}

json OllamaFormat::final_line(const JobEvent& done) const {
  json out = line(ParsedDelta{});
  out["done"] = true;
  out["done_reason"] = done.finish_reason == "length" ? "length" : "stop";
  auto ns = [](double s) { return static_cast<int64_t>(s * 1e9); };
  out["total_duration"] = ns(done.prefill_seconds + done.decode_seconds);
  out["load_duration"] = 0;
  out["prompt_eval_count"] = done.prompt_tokens - done.cached_tokens;
  out["prompt_eval_duration"] = ns(done.prefill_seconds);
  out["eval_count"] = done.completion_tokens;
  out["eval_duration"] = ns(done.decode_seconds);
  if (!chat_) {
    json ctx = req_->prompt;
    for (int32_t t : done.generated) ctx.push_back(t);
    out["context"] = ctx;
  }
  return out;
}

std::string OllamaFormat::frames(const JobEvent& ev) {
  ParsedDelta d;
  if (req_->chat)
    d = ev.kind == JobEvent::Kind::Done ? parser_.finish() : parser_.push(ev.text);
  else
    d.content = ev.text;  // raw: the text as it is
  if (!req_->parallel_tool_calls && d.tool_calls.size() > 1) d.tool_calls.resize(1);
  all_.append(d);
  std::string out;
  if (!d.empty()) out += line(d).dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
  if (ev.kind == JobEvent::Kind::Done)
    out += final_line(ev).dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
  return out;
}

std::string OllamaFormat::error_frames(const ApiError& e) { return json{{"error", e.what()}}.dump() + "\n"; }

json OllamaFormat::whole(const JobEvent& done) {
  json out = final_line(done);
  const json body = line(all_);
  if (chat_)
    out["message"] = body["message"];
  else {
    out["response"] = body["response"];
    if (body.contains("thinking")) out["thinking"] = body["thinking"];
  }
  return out;
}

namespace {

std::string parameter_size(int64_t n) {
  char buf[32];
  if (n >= 1000000000)
    std::snprintf(buf, sizeof buf, "%.1fB", n / 1e9);
  else if (n >= 1000000)
    std::snprintf(buf, sizeof buf, "%.1fM", n / 1e6);
  else
    std::snprintf(buf, sizeof buf, "%.1fK", n / 1e3);
  return buf;
}

json details(const Engine& engine) {
  const LoadReport& rep = engine.model().report();
  std::string level = rep.quantized ? "MLX affine" : "";
  if (level.empty()) {
    int64_t most = 0;
    for (const auto& [dtype, count] : rep.dtype_counts)
      if (count > most) most = count, level = dtype;
  }
  return {{"parent_model", ""},
          {"format", "safetensors"},
          {"family", "qwen3_5_moe"},
          {"families", json::array({"qwen3_5_moe"})},
          {"parameter_size", parameter_size(rep.parameters)},
          {"quantization_level", level}};
}

}  // namespace

bool ollama_name_matches(const std::string& asked, const std::string& served) {
  return asked == served || asked == served + ":latest";
}

json ollama_model_entry(const Engine& engine, const std::string& name) {
  return {{"name", name},
          {"model", name},
          {"modified_at", rfc3339_now()},
          {"size", engine.model().report().weight_bytes},
          {"digest", ""},
          {"details", details(engine)}};
}

json ollama_show(const Engine& engine, const std::string& name, int64_t context) {
  const ModelConfig& c = engine.model().config();
  return {{"license", ""},
          {"modelfile", "# served by lily\nFROM " + name + "\n"},
          {"parameters", ""},
          {"template", engine.chat_template().source()},
          {"details", details(engine)},
          {"model_info",
           {{"general.architecture", "qwen3_5_moe"},
            {"general.parameter_count", engine.model().report().parameters},
            {"qwen3_5_moe.context_length", context},
            {"qwen3_5_moe.embedding_length", c.hidden_size},
            {"qwen3_5_moe.block_count", c.num_layers},
            {"qwen3_5_moe.expert_count", c.num_experts},
            {"qwen3_5_moe.expert_used_count", c.experts_per_token},
            {"qwen3_5_moe.vocab_size", c.vocab_size}}},
          {"capabilities", json::array({"completion", "tools", "thinking"})},
          {"modified_at", rfc3339_now()}};
}

}  // namespace lily::server
