#include "lily/server/openai_request.h"

#include "lily/io/bounded_input.h"

#include <cmath>
#include <sstream>

#include "lily/error.h"
#include "lily/server/api_error.h"
#include "lily/server/request_fields.h"

namespace lily::server {

using json = nlohmann::ordered_json;

namespace {

std::string plain(double x) {
  std::ostringstream s;
  s << x;
  return s.str();
}

std::optional<double> number(const json& body, const char* name, double lo, double hi) {
  const json* v = field(body, name);
  if (!v) return std::nullopt;
  if (!v->is_number()) throw bad_field(name, "must be a number");
  const double x = v->get<double>();
  if (!(x >= lo && x <= hi))
    throw bad_field(name, "must be between " + plain(lo) + " and " + plain(hi) + ", got " + v->dump());
  return x;
}

std::optional<int64_t> integer(const json& body, const char* name, int64_t lo, int64_t hi) {
  const json* v = field(body, name);
  if (!v) return std::nullopt;
  if (!v->is_number_integer()) throw bad_field(name, "must be an integer");
  const int64_t x = v->get<int64_t>();
  if (x < lo || x > hi)
    throw bad_field(name, "must be between " + std::to_string(lo) + " and " + std::to_string(hi) + ", got " + v->dump());
  return x;
}

std::optional<bool> boolean(const json& body, const char* name) {
  const json* v = field(body, name);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) throw bad_field(name, "must be true or false");
  return v->get<bool>();
}

// The fields both endpoints share: sampling, limits, stop strings, streaming.
void parse_common(const json& body, const Engine& engine, ApiRequest& r) {
  if (!body.is_object()) throw ApiError(400, "the request body must be a JSON object");
  SamplingParams& s = r.params.sampling;
  s = engine.default_sampling();
  if (auto v = number(body, "temperature", 0, 2)) s.temperature = *v;
  if (auto v = number(body, "top_p", 0, 1)) {
    if (*v == 0) throw bad_field("top_p", "must be greater than 0");
    s.top_p = *v;
  }
  if (auto v = integer(body, "top_k", -1, 1 << 30)) s.top_k = std::max<int64_t>(0, *v);
  if (auto v = number(body, "min_p", 0, 1)) s.min_p = *v;
  if (auto v = number(body, "presence_penalty", -2, 2)) s.presence_penalty = *v;
  if (auto v = number(body, "frequency_penalty", -2, 2)) s.frequency_penalty = *v;
  if (auto v = number(body, "repetition_penalty", 0, 10)) {
    if (*v == 0) throw bad_field("repetition_penalty", "must be greater than 0");
    s.repetition_penalty = *v;
  }
  if (const json* v = field(body, "seed")) {
    if (!v->is_number_integer()) throw bad_field("seed", "must be an integer");
    s.seed = static_cast<uint64_t>(v->get<int64_t>());
  }
  if (const json* v = field(body, "logit_bias")) {
    if (!v->is_object()) throw bad_field("logit_bias", "must be an object of token id to bias");
    const int64_t V = engine.model().config().vocab_size;
    s.logit_bias.clear();
    for (const auto& [key, bias] : v->items()) {
      char* end = nullptr;
      const long id = std::strtol(key.c_str(), &end, 10);
      if (key.empty() || *end || id < 0 || id >= V)
        throw bad_field("logit_bias", "'" + key + "' is not a token id of this model (0.." + std::to_string(V - 1) + ")");
      if (!bias.is_number() || bias.get<double>() < -100 || bias.get<double>() > 100)
        throw bad_field("logit_bias", "the bias of token " + key + " must be a number from -100 to 100");
      s.logit_bias[static_cast<int32_t>(id)] = bias.get<float>();
    }
  }
  if (auto v = integer(body, "n", 1, 1 << 30); v && *v != 1) throw bad_field("n", "only n = 1 is supported");
  std::optional<int64_t> mt = integer(body, "max_tokens", 1, int64_t(1) << 40);
  if (auto v = integer(body, "max_completion_tokens", 1, int64_t(1) << 40)) mt = v;
  r.max_tokens = mt;
  if (const json* v = field(body, "stop")) {
    if (v->is_string()) {
      r.params.stop = {v->get<std::string>()};
    } else if (v->is_array()) {
      for (const auto& x : *v) {
        if (!x.is_string()) throw bad_field("stop", "must be a string or an array of strings");
        r.params.stop.push_back(x.get<std::string>());
      }
      if (r.params.stop.size() > 16) throw bad_field("stop", "at most 16 stop strings");
    } else {
      throw bad_field("stop", "must be a string or an array of strings");
    }
    for (const auto& st : r.params.stop)
      if (st.empty()) throw bad_field("stop", "stop strings must not be empty");
  }
  r.stream = boolean(body, "stream").value_or(false);
  if (const json* v = field(body, "stream_options")) {
    if (!v->is_object()) throw bad_field("stream_options", "must be an object");
    r.include_usage = boolean(*v, "include_usage").value_or(false);
  }
  try {
    s.validate();
  } catch (const Error& e) {
    throw ApiError(400, e.what());
  }
}

std::string text_of_content(const json& content, const std::string& where) {
  if (content.is_null()) return "";
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) throw bad_field(where, "content must be a string, null or an array of parts");
  std::string text;
  for (const auto& part : content) {
    if (!part.is_object() || !part.contains("type") || !part["type"].is_string())
      throw bad_field(where, "each content part must be an object with a type");
    const std::string type = part["type"].get<std::string>();
    if (type != "text" && type != "input_text")
      throw bad_field(where, "content parts of type '" + type + "' are not supported: this model reads text only");
    if (!part.contains("text") || !part["text"].is_string()) throw bad_field(where, "a text part needs a string 'text'");
    text += part["text"].get<std::string>();
  }
  return text;
}

}  // namespace

json normalize_messages(const json& messages) {
  if (!messages.is_array() || messages.empty()) throw bad_field("messages", "must be a non-empty array");
  std::string system;
  bool has_system = false;
  json out = json::array();
  for (size_t i = 0; i < messages.size(); ++i) {
    const json& m = messages[i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) throw bad_field(where, "must be an object");
    if (!m.contains("role") || !m["role"].is_string()) throw bad_field(where + ".role", "must be a string");
    const std::string role = m["role"].get<std::string>();
    const std::string content = text_of_content(m.contains("content") ? m["content"] : json(), where + ".content");
    if (role == "system" || role == "developer") {
      if (has_system) system += "\n\n";
      system += content;
      has_system = true;
      continue;
    }
    json msg = {{"role", role}, {"content", content}};
    if (role == "assistant") {
      if (m.contains("reasoning_content") && m["reasoning_content"].is_string())
        msg["reasoning_content"] = m["reasoning_content"];
      if (m.contains("tool_calls") && !m["tool_calls"].is_null()) {
        if (!m["tool_calls"].is_array()) throw bad_field(where + ".tool_calls", "must be an array");
        json calls = json::array();
        for (const auto& c : m["tool_calls"]) {
          const json fn = c.is_object() && c.contains("function") ? c["function"] : json();
          if (!fn.is_object() || !fn.contains("name") || !fn["name"].is_string())
            throw bad_field(where + ".tool_calls", "each call needs function.name");
          json args = json::object();
          if (fn.contains("arguments") && fn["arguments"].is_string()) {
            const std::string a = fn["arguments"].get<std::string>();
            try {
              check_json_depth(a, where + ".tool_calls arguments");
            } catch (const Error& e) {
              throw bad_field(where + ".tool_calls", e.what());
            }
            args = a.empty() ? json::object() : json::parse(a, nullptr, false);
            if (args.is_discarded() || !args.is_object())
              throw bad_field(where + ".tool_calls", "the arguments of '" + fn["name"].get<std::string>() +
                                                         "' are not a JSON object");
          } else if (fn.contains("arguments") && fn["arguments"].is_object()) {
            args = fn["arguments"];
          }
          calls.push_back({{"id", c.value("id", "")}, {"type", "function"},
                           {"function", {{"name", fn["name"]}, {"arguments", args}}}});
        }
        msg["tool_calls"] = calls;
      }
    } else if (role == "tool") {
      if (m.contains("tool_call_id") && m["tool_call_id"].is_string()) msg["tool_call_id"] = m["tool_call_id"];
    } else if (role != "user") {
      throw bad_field(where + ".role", "unknown role '" + role + "' (system, developer, user, assistant or tool)");
    }
    out.push_back(std::move(msg));
  }
  if (has_system) out.insert(out.begin(), json{{"role", "system"}, {"content", system}});
  if (out.empty()) throw bad_field("messages", "has no user, assistant or tool message");
  return out;
}

namespace {

ApiRequest chat_request(const json& body, const Engine& engine, bool content_tokens_as_text) {
  ApiRequest r;
  parse_common(body, engine, r);
  if (!body.contains("messages")) throw bad_field("messages", "is required");
  ChatRequest chat;
  chat.messages = normalize_messages(body["messages"]);

  if (const json* v = field(body, "tools")) {
    if (!v->is_array()) throw bad_field("tools", "must be an array");
    for (const auto& t : *v)
      if (!t.is_object() || (t.contains("type") && t["type"] != "function") || !t.contains("function") ||
          !t["function"].is_object() || !t["function"].contains("name") || !t["function"]["name"].is_string())
        throw bad_field("tools", "each tool must be {\"type\": \"function\", \"function\": {\"name\": ...}}");
    if (!v->empty()) r.tools = *v;
  }
  if (const json* v = field(body, "tool_choice")) {
    if (v->is_string()) {
      const std::string c = v->get<std::string>();
      if (c == "auto") r.tool_choice = ToolChoice::Auto;
      else if (c == "none") r.tool_choice = ToolChoice::None;
      else if (c == "required") r.tool_choice = ToolChoice::Required;
      else throw bad_field("tool_choice", "must be auto, none, required or {\"type\": \"function\", ...}");
    } else if (v->is_object() && v->contains("function") && (*v)["function"].is_object() &&
               (*v)["function"].contains("name") && (*v)["function"]["name"].is_string()) {
      r.tool_choice = ToolChoice::Named;
      r.forced_function = (*v)["function"]["name"].get<std::string>();
    } else {
      throw bad_field("tool_choice", "must be auto, none, required or {\"type\": \"function\", \"function\": {\"name\": ...}}");
    }
  }
  if (r.tool_choice == ToolChoice::Required || r.tool_choice == ToolChoice::Named) {
    if (r.tools.is_null()) throw bad_field("tool_choice", "a tool is required but the request has no tools");
    if (r.tool_choice == ToolChoice::Named) {
      bool found = false;
      for (const auto& t : r.tools) found |= t["function"]["name"] == r.forced_function;
      if (!found) throw bad_field("tool_choice", "no tool is named '" + r.forced_function + "'");
    }
  }
  r.parallel_tool_calls = boolean(body, "parallel_tool_calls").value_or(true);

  // Thinking: reasoning_effort first, chat_template_kwargs override it.
  if (const json* v = field(body, "reasoning_effort")) {
    if (!v->is_string()) throw bad_field("reasoning_effort", "must be a string");
    const std::string e = v->get<std::string>();
    if (e == "none" || e == "minimal") chat.kwargs["enable_thinking"] = false;
    else if (e == "low" || e == "medium" || e == "high") chat.kwargs["enable_thinking"] = true;
    else throw bad_field("reasoning_effort", "must be none, minimal, low, medium or high");
  }
  if (const json* v = field(body, "chat_template_kwargs")) {
    if (!v->is_object()) throw bad_field("chat_template_kwargs", "must be an object");
    for (const auto& [k, x] : v->items()) chat.kwargs[k] = x;
  }
  if (const json* v = field(body, "response_format")) {
    const std::string type = v->is_object() && v->contains("type") && (*v)["type"].is_string()
                                 ? (*v)["type"].get<std::string>() : "";
    if (type == "json_object") r.params.json_object = true;
    else if (type == "json_schema")
      throw ApiError(400, "'response_format': json_schema is not supported yet; use json_object", "invalid_request_error",
                     "response_format");
    else if (type != "text") throw bad_field("response_format", "type must be text or json_object");
  }
  // A forced call is written into the prompt: the answer starts inside it (no thinking first).
  if (r.tool_choice == ToolChoice::Required || r.tool_choice == ToolChoice::Named) {
    chat.kwargs["enable_thinking"] = false;
    r.forced_prefix = r.tool_choice == ToolChoice::Named ? "<tool_call>\n<function=" + r.forced_function + ">\n"
                                                         : "<tool_call>\n<function=";
  }
  if (r.tool_choice != ToolChoice::None) chat.tools = r.tools;
  r.reasoning = !(chat.kwargs.contains("enable_thinking") && chat.kwargs["enable_thinking"].is_boolean() &&
                  !chat.kwargs["enable_thinking"].get<bool>());
  r.params.reasoning_open = r.reasoning;

  if (auto lp = boolean(body, "logprobs")) r.logprobs = *lp;
  if (auto top = integer(body, "top_logprobs", 0, 20)) {
    if (!r.logprobs) throw bad_field("top_logprobs", "needs logprobs: true");
    r.params.top_logprobs = static_cast<int>(*top);
  } else if (r.logprobs) {
    r.params.top_logprobs = 0;
  }
  try {
    r.prompt = engine.chat_prompt(chat, &r.prompt_text, content_tokens_as_text);
  } catch (const Error& e) {
    throw ApiError(400, e.what());
  }
  if (!r.forced_prefix.empty()) {
    const auto extra = engine.tokenizer().encode(r.forced_prefix);
    r.prompt.insert(r.prompt.end(), extra.begin(), extra.end());
    r.prompt_text += r.forced_prefix;
  }
  return r;
}

ApiRequest completion_request(const json& body, const Engine& engine) {
  ApiRequest r;
  r.chat = false;
  r.reasoning = false;
  parse_common(body, engine, r);
  const json* p = field(body, "prompt");
  if (!p) throw bad_field("prompt", "is required");
  const int64_t V = engine.model().config().vocab_size;
  if (p->is_array() && p->size() == 1 && (*p)[0].is_string()) p = &(*p)[0];
  if (p->is_string()) {
    r.prompt_text = p->get<std::string>();
    r.prompt = engine.tokenizer().encode(r.prompt_text);
  } else if (p->is_array() && !p->empty()) {
    for (const auto& t : *p) {
      if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= V)
        throw bad_field("prompt", "must be a string or an array of token ids (0.." + std::to_string(V - 1) + ")");
      r.prompt.push_back(t.get<int32_t>());
    }
  } else {
    throw bad_field("prompt", "must be a string, an array of one string, or an array of token ids");
  }
  if (r.prompt.empty()) throw bad_field("prompt", "is empty");
  if (auto lp = integer(body, "logprobs", 0, 20)) {
    r.logprobs = true;
    r.params.top_logprobs = static_cast<int>(*lp);
  }
  if (boolean(body, "echo").value_or(false)) throw bad_field("echo", "echo is not supported");
  return r;
}

}  // namespace

ApiRequest parse_chat_request(const json& body, const Engine& engine, bool content_tokens_as_text) {
  return json_type_errors_as_400([&] { return chat_request(body, engine, content_tokens_as_text); });
}

ApiRequest parse_completion_request(const json& body, const Engine& engine) {
  return json_type_errors_as_400([&] { return completion_request(body, engine); });
}

}  // namespace lily::server
