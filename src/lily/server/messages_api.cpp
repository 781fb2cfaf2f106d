#include "lily/server/messages_api.h"

#include "lily/server/api_dialect.h"
#include "lily/server/openai_response.h"
#include "lily/server/request_fields.h"

namespace lily::server {

using json = nlohmann::ordered_json;

namespace {

// A string, or text blocks (the system prompt, a tool's result).
std::string text_of(const json& content, const std::string& where) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) throw bad_field(where, "must be a string or an array of text blocks");
  std::string text;
  for (size_t i = 0; i < content.size(); ++i) {
    const std::string at = where + "[" + std::to_string(i) + "]";
    if (!content[i].is_object()) throw bad_field(at, "must be an object");
    const std::string type = string_field(content[i], "type", at);
    if (type != "text")
      throw bad_field(at + ".type", "blocks of type '" + type + "' are not supported here: this model reads text only");
    if (!text.empty()) text += "\n";
    text += string_field(content[i], "text", at);
  }
  return text;
}

// Anthropic turns to Chat Completions messages: a user turn's tool_result
// blocks become tool turns (in order, text around them a user turn), an
// assistant turn's thinking becomes reasoning_content and its tool_use blocks
// tool_calls.
json to_messages(const json& messages) {
  if (!messages.is_array() || messages.empty()) throw bad_field("messages", "must be a non-empty array");
  json out = json::array();
  for (size_t i = 0; i < messages.size(); ++i) {
    const json& m = messages[i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) throw bad_field(where, "must be an object");
    const std::string role = string_field(m, "role", where);
    if (role != "user" && role != "assistant") throw bad_field(where + ".role", "must be user or assistant");
    const json* content = field(m, "content");
    if (!content) throw bad_field(where + ".content", "is required");
    if (content->is_string()) {
      out.push_back({{"role", role}, {"content", content->get<std::string>()}});
      continue;
    }
    if (!content->is_array()) throw bad_field(where + ".content", "must be a string or an array of content blocks");
    json turn = {{"role", role}, {"content", ""}};
    bool has_text = false;
    auto flush_user_text = [&] {
      if (role == "user" && has_text) out.push_back(turn);
      turn = {{"role", role}, {"content", ""}};
      has_text = false;
    };
    for (size_t j = 0; j < content->size(); ++j) {
      const json& b = (*content)[j];
      const std::string at = where + ".content[" + std::to_string(j) + "]";
      if (!b.is_object()) throw bad_field(at, "must be an object");
      const std::string type = string_field(b, "type", at);
      if (type == "text") {
        std::string& c = turn["content"].get_ref<std::string&>();
        c += string_field(b, "text", at);
        has_text = true;
      } else if (type == "tool_result" && role == "user") {
        flush_user_text();
        std::string result = field(b, "content") ? text_of(b["content"], at + ".content") : "";
        if (const json* err = field(b, "is_error"); err && err->is_boolean() && err->get<bool>())
          result = "Error: " + result;
        out.push_back({{"role", "tool"}, {"tool_call_id", string_field(b, "tool_use_id", at)}, {"content", result}});
      } else if (type == "tool_use" && role == "assistant") {
        const json* input = field(b, "input");
        if (input && !input->is_object()) throw bad_field(at + ".input", "must be an object");
        if (!turn.contains("tool_calls")) turn["tool_calls"] = json::array();
        turn["tool_calls"].push_back(
            {{"id", string_field(b, "id", at)},
             {"type", "function"},
             {"function", {{"name", string_field(b, "name", at)}, {"arguments", input ? *input : json::object()}}}});
      } else if (type == "thinking" && role == "assistant") {
        turn["reasoning_content"] = turn.value("reasoning_content", "") + string_field(b, "thinking", at);
      } else if (type == "redacted_thinking" && role == "assistant") {
        // opaque by design: nothing of it can be shown to this model
      } else {
        throw bad_field(at + ".type", "blocks of type '" + type + "' are not supported in a " + role +
                                          " turn (text, tool_use, tool_result and thinking are)");
      }
    }
    if (role == "user")
      flush_user_text();
    else
      out.push_back(turn);
  }
  if (out.back()["role"] == "assistant")
    throw bad_field("messages", "ends with an assistant turn: continuing a prefilled answer is not supported");
  return out;
}

}  // namespace

namespace {
ApiRequest parse_messages_request_fields(const json& body, const Engine& engine, bool content_tokens_as_text,
                                         bool count_only) {
  if (!body.is_object()) throw ApiError(400, "the request body must be a JSON object");
  json chat = json::object();
  for (const char* name : {"temperature", "top_p", "top_k", "stream", "seed", "min_p"})
    if (const json* v = field(body, name)) chat[name] = *v;
  if (!count_only) {
    const json* mt = field(body, "max_tokens");
    if (!mt) throw bad_field("max_tokens", "is required");
    if (!mt->is_number_integer() || mt->get<int64_t>() < 1) throw bad_field("max_tokens", "must be a positive integer");
    chat["max_tokens"] = *mt;
  }
  if (const json* v = field(body, "stop_sequences")) {
    if (!v->is_array()) throw bad_field("stop_sequences", "must be an array of strings");
    chat["stop"] = *v;
  }
  const json* msgs = field(body, "messages");
  if (!msgs) throw bad_field("messages", "is required");
  json messages = to_messages(*msgs);
  if (const json* v = field(body, "system")) {
    const std::string system = text_of(*v, "system");
    if (!system.empty()) messages.insert(messages.begin(), json{{"role", "system"}, {"content", system}});
  }
  chat["messages"] = messages;

  if (const json* v = field(body, "tools")) {
    if (!v->is_array()) throw bad_field("tools", "must be an array");
    json tools = json::array();
    for (size_t i = 0; i < v->size(); ++i) {
      const json& t = (*v)[i];
      const std::string where = "tools[" + std::to_string(i) + "]";
      if (!t.is_object()) throw bad_field(where, "must be an object");
      if (const json* type = field(t, "type"); type && *type != "custom")
        throw bad_field(where + ".type", "server tools (" + type->dump() +
                                             ") are not supported: this server runs client tools with an input_schema");
      json fn = {{"name", string_field(t, "name", where)}};
      if (const json* d = field(t, "description")) fn["description"] = *d;
      const json* schema = field(t, "input_schema");
      if (!schema || !schema->is_object()) throw bad_field(where + ".input_schema", "must be a JSON schema object");
      fn["parameters"] = *schema;
      tools.push_back({{"type", "function"}, {"function", fn}});
    }
    chat["tools"] = tools;
  }
  if (const json* v = field(body, "tool_choice")) {
    const std::string type = v->is_object() ? v->value("type", "") : "";
    if (type == "auto")
      chat["tool_choice"] = "auto";
    else if (type == "any")
      chat["tool_choice"] = "required";
    else if (type == "none")
      chat["tool_choice"] = "none";
    else if (type == "tool")
      chat["tool_choice"] = {{"type", "function"}, {"function", {{"name", string_field(*v, "name", "tool_choice")}}}};
    else
      throw bad_field("tool_choice", "type must be auto, any, tool or none");
    if (const json* p = field(*v, "disable_parallel_tool_use"); p && p->is_boolean())
      chat["parallel_tool_calls"] = !p->get<bool>();
  }
  // This API thinks only when asked.
  bool thinking = false;
  if (const json* v = field(body, "thinking")) {
    const std::string type = v->is_object() ? v->value("type", "") : "";
    if (type == "enabled" || type == "adaptive")
      thinking = true;
    else if (type != "disabled")
      throw bad_field("thinking", "type must be enabled, adaptive or disabled");
  }
  chat["chat_template_kwargs"] = {{"enable_thinking", thinking}};
  return parse_chat_request(chat, engine, content_tokens_as_text);
}
}  // namespace

ApiRequest parse_messages_request(const json& body, const Engine& engine, bool content_tokens_as_text,
                                  bool count_only) {
  return json_type_errors_as_400(
      [&] { return parse_messages_request_fields(body, engine, content_tokens_as_text, count_only); });
}

MessagesFormat::MessagesFormat(std::shared_ptr<const ApiRequest> req, std::string model)
    : req_(std::move(req)),
      model_(std::move(model)),
      id_(random_id("msg_")),
      blocks_(*req_, [](AnswerBlock::Kind k) { return k == AnswerBlock::Kind::ToolCall ? random_id("toolu_") : ""; }) {}

json MessagesFormat::block(size_t index, bool done) const {
  const AnswerBlock& b = blocks_.blocks()[index];
  switch (b.kind) {
    case AnswerBlock::Kind::Reasoning:
      return {{"type", "thinking"}, {"thinking", done ? b.text : ""}, {"signature", ""}};
    case AnswerBlock::Kind::Text:
      return {{"type", "text"}, {"text", done ? b.text : ""}};
    case AnswerBlock::Kind::ToolCall:
      return {{"type", "tool_use"},
              {"id", b.call_id},
              {"name", b.call.name},
              {"input", done ? b.call.arguments : json::object()}};
  }
  return {};
}

std::string MessagesFormat::stop_reason(const JobEvent& done) const {
  if (done.finish_reason == "length") return "max_tokens";
  if (!done.stop_sequence.empty()) return "stop_sequence";
  return blocks_.has_calls() ? "tool_use" : "end_turn";
}

std::string MessagesFormat::frames(const JobEvent& ev) {
  std::string out;
  if (!opened_) {
    opened_ = true;
    json msg = {{"id", id_},
                {"type", "message"},
                {"role", "assistant"},
                {"model", model_},
                {"content", json::array()},
                {"stop_reason", nullptr},
                {"stop_sequence", nullptr},
                {"usage", {{"input_tokens", req_->prompt.size()}, {"output_tokens", 0}}}};
    out += sse_event("message_start", {{"type", "message_start"}, {"message", msg}});
  }
  for (const BlockEvent& be : blocks_.take(ev)) {
    const AnswerBlock& b = blocks_.blocks()[be.index];
    switch (be.kind) {
      case BlockEvent::Kind::Open:
        out += sse_event(
            "content_block_start",
            {{"type", "content_block_start"}, {"index", be.index}, {"content_block", block(be.index, false)}});
        break;
      case BlockEvent::Kind::Delta: {
        json delta = b.kind == AnswerBlock::Kind::Reasoning ? json{{"type", "thinking_delta"}, {"thinking", be.delta}}
                     : b.kind == AnswerBlock::Kind::Text
                         ? json{{"type", "text_delta"}, {"text", be.delta}}
                         : json{{"type", "input_json_delta"}, {"partial_json", be.delta}};
        out +=
            sse_event("content_block_delta", {{"type", "content_block_delta"}, {"index", be.index}, {"delta", delta}});
        break;
      }
      case BlockEvent::Kind::Close:
        out += sse_event("content_block_stop", {{"type", "content_block_stop"}, {"index", be.index}});
        break;
    }
  }
  if (ev.kind == JobEvent::Kind::Done) {
    const json usage = {{"input_tokens", ev.prompt_tokens - ev.cached_tokens},
                        {"output_tokens", ev.completion_tokens},
                        {"cache_read_input_tokens", ev.cached_tokens},
                        {"cache_creation_input_tokens", 0}};
    out +=
        sse_event("message_delta", {{"type", "message_delta"},
                                    {"delta",
                                     {{"stop_reason", stop_reason(ev)},
                                      {"stop_sequence", ev.stop_sequence.empty() ? json() : json(ev.stop_sequence)}}},
                                    {"usage", usage}});
    out += sse_event("message_stop", {{"type", "message_stop"}});
  }
  return out;
}

std::string MessagesFormat::error_frames(const ApiError& e) {
  return sse_event("error", error_body(Dialect::Anthropic, e));
}

json MessagesFormat::whole(const JobEvent& done) {
  json content = json::array();
  for (size_t i = 0; i < blocks_.blocks().size(); ++i) content.push_back(block(i, true));
  return {{"id", id_},
          {"type", "message"},
          {"role", "assistant"},
          {"model", model_},
          {"content", content},
          {"stop_reason", stop_reason(done)},
          {"stop_sequence", done.stop_sequence.empty() ? json() : json(done.stop_sequence)},
          {"usage",
           {{"input_tokens", done.prompt_tokens - done.cached_tokens},
            {"output_tokens", done.completion_tokens},
            {"cache_read_input_tokens", done.cached_tokens},
            {"cache_creation_input_tokens", 0}}}};
}

}  // namespace lily::server
