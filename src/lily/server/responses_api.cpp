#include "lily/server/responses_api.h"

#include "lily/server/openai_response.h"
#include "lily/server/request_fields.h"

namespace lily::server {

using json = nlohmann::ordered_json;

namespace {

// The text of a message's content: a string, or parts of input_text,
// output_text (earlier answers) or refusal.
std::string text_of(const json& content, const std::string& where) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) throw bad_field(where, "must be a string or an array of content parts");
  std::string text;
  for (size_t i = 0; i < content.size(); ++i) {
    const json& p = content[i];
    const std::string at = where + "[" + std::to_string(i) + "]";
    if (!p.is_object()) throw bad_field(at, "must be an object");
    const std::string type = string_field(p, "type", at);
    if (type == "input_text" || type == "output_text" || type == "text")
      text += string_field(p, "text", at);
    else if (type == "refusal")
      text += string_field(p, "refusal", at);
    else
      throw bad_field(at + ".type", "content of type '" + type + "' is not supported: this model reads text only");
  }
  return text;
}

}  // namespace

json responses_input_to_messages(const json& input) {
  json messages = json::array();
  if (input.is_string()) {
    messages.push_back({{"role", "user"}, {"content", input.get<std::string>()}});
    return messages;
  }
  if (!input.is_array()) throw bad_field("input", "must be a string or an array of input items");
  std::string reasoning;  // a reasoning item goes with the assistant turn that follows it
  auto assistant_turn = [&](bool extend) -> json& {
    if (!(extend && !messages.empty() && messages.back()["role"] == "assistant"))
      messages.push_back({{"role", "assistant"}, {"content", ""}});
    json& m = messages.back();
    if (!reasoning.empty()) {
      m["reasoning_content"] = m.value("reasoning_content", "") + reasoning;
      reasoning.clear();
    }
    return m;
  };
  for (size_t i = 0; i < input.size(); ++i) {
    const json& item = input[i];
    const std::string where = "input[" + std::to_string(i) + "]";
    if (!item.is_object()) throw bad_field(where, "must be an object");
    const std::string type = field(item, "type") ? string_field(item, "type", where) : "message";
    if (type == "message") {
      const std::string role = string_field(item, "role", where);
      if (role != "user" && role != "assistant" && role != "system" && role != "developer")
        throw bad_field(where + ".role", "must be user, assistant, system or developer");
      const json* content = field(item, "content");
      if (!content) throw bad_field(where + ".content", "is required");
      const std::string text = text_of(*content, where + ".content");
      if (role == "assistant") {
        json& m = assistant_turn(false);
        m["content"] = text;
      } else {
        messages.push_back({{"role", role}, {"content", text}});
      }
    } else if (type == "function_call") {
      const std::string args = string_field(item, "arguments", where);
      json call = {{"id", string_field(item, "call_id", where)},
                   {"type", "function"},
                   {"function", {{"name", string_field(item, "name", where)}, {"arguments", args}}}};
      json& m = assistant_turn(true);
      if (!m.contains("tool_calls")) m["tool_calls"] = json::array();
      m["tool_calls"].push_back(std::move(call));
    } else if (type == "function_call_output") {
      const json* out = field(item, "output");
      if (!out) throw bad_field(where + ".output", "is required");
      messages.push_back({{"role", "tool"},
                          {"tool_call_id", string_field(item, "call_id", where)},
                          {"content", text_of(*out, where + ".output")}});
    } else if (type == "reasoning") {
      // the reasoning text itself; a summary stands in where there is none
      std::string text;
      if (const json* c = field(item, "content"); c && c->is_array())
        for (const auto& p : *c)
          if (p.is_object() && p.value("type", "") == "reasoning_text" && p.contains("text") && p["text"].is_string())
            text += p["text"].get<std::string>();
      if (text.empty())
        if (const json* s = field(item, "summary"); s && s->is_array())
          for (const auto& p : *s)
            if (p.is_object() && p.contains("text") && p["text"].is_string()) text += p["text"].get<std::string>();
      reasoning += text;
    } else {
      throw bad_field(where + ".type", "items of type '" + type +
                                           "' are not supported (message, function_call, function_call_output "
                                           "and reasoning are)");
    }
  }
  if (messages.empty()) throw bad_field("input", "has no message");
  return messages;
}

namespace {
ResponsesRequest parse_responses_request_fields(const json& body, const Engine& engine, ResponseStore& store,
                                                bool content_tokens_as_text) {
  if (!body.is_object()) throw ApiError(400, "the request body must be a JSON object");
  ResponsesRequest r;
  json chat = json::object();
  for (const char* unsupported : {"background", "conversation", "prompt"})
    if (field(body, unsupported) && !(body[unsupported].is_boolean() && !body[unsupported].get<bool>()))
      throw bad_field(unsupported, "is not supported by this server");
  // Sampling and Lily's extensions pass through under their Chat Completions names.
  for (const char* name : {"temperature", "top_p", "top_k", "min_p", "seed", "presence_penalty", "frequency_penalty",
                           "repetition_penalty", "stream", "parallel_tool_calls", "stop", "logit_bias"})
    if (const json* v = field(body, name)) chat[name] = *v;
  if (const json* v = field(body, "max_output_tokens")) {
    if (!v->is_number_integer() || v->get<int64_t>() < 1)
      throw bad_field("max_output_tokens", "must be a positive integer");
    chat["max_tokens"] = *v;
  }
  if (const json* v = field(body, "store")) {
    if (!v->is_boolean()) throw bad_field("store", "must be true or false");
    r.store = v->get<bool>();
  }

  // The conversation: a stored one first, then the new input.
  const json* input = field(body, "input");
  if (!input) throw bad_field("input", "is required");
  json conversation = json::array();
  if (const json* prev = field(body, "previous_response_id")) {
    if (!prev->is_string()) throw bad_field("previous_response_id", "must be a string");
    r.previous_response_id = prev->get<std::string>();
    auto stored = store.get(r.previous_response_id);
    if (!stored)
      throw ApiError(
          404, "no stored response has the id '" + r.previous_response_id + "' (it was never stored, or was evicted)",
          "invalid_request_error", "previous_response_id");
    conversation = stored->conversation;
  }
  for (auto& m : responses_input_to_messages(*input)) conversation.push_back(std::move(m));
  r.conversation = conversation;
  json messages = json::array();
  std::string instructions;
  if (const json* v = field(body, "instructions")) {
    if (!v->is_string()) throw bad_field("instructions", "must be a string");
    instructions = v->get<std::string>();
    if (!instructions.empty()) messages.push_back({{"role", "system"}, {"content", instructions}});
  }
  for (const auto& m : conversation) messages.push_back(m);
  chat["messages"] = messages;

  // Function tools are flat here and nested in Chat Completions.
  if (const json* v = field(body, "tools")) {
    if (!v->is_array()) throw bad_field("tools", "must be an array");
    json tools = json::array();
    for (size_t i = 0; i < v->size(); ++i) {
      const json& t = (*v)[i];
      const std::string where = "tools[" + std::to_string(i) + "]";
      if (!t.is_object()) throw bad_field(where, "must be an object");
      const std::string type = string_field(t, "type", where);
      if (type != "function")
        throw bad_field(where + ".type",
                        "tools of type '" + type + "' are not supported: this server runs function tools");
      json fn = {{"name", string_field(t, "name", where)}};
      if (const json* d = field(t, "description")) fn["description"] = *d;
      if (const json* p = field(t, "parameters")) fn["parameters"] = *p;
      tools.push_back({{"type", "function"}, {"function", fn}});
    }
    chat["tools"] = tools;
  }
  if (const json* v = field(body, "tool_choice")) {
    if (v->is_string()) {
      chat["tool_choice"] = *v;
    } else if (v->is_object() && v->value("type", "") == "function" && v->contains("name") &&
               (*v)["name"].is_string()) {
      chat["tool_choice"] = {{"type", "function"}, {"function", {{"name", (*v)["name"]}}}};
    } else {
      throw bad_field("tool_choice", "must be auto, none, required or {\"type\": \"function\", \"name\": ...}");
    }
  }
  std::string effort;
  if (const json* v = field(body, "reasoning")) {
    if (!v->is_object()) throw bad_field("reasoning", "must be an object");
    if (const json* e = field(*v, "effort")) {
      if (!e->is_string()) throw bad_field("reasoning.effort", "must be a string");
      effort = e->get<std::string>();
      if (effort == "xhigh")
        chat["reasoning_effort"] = "high";
      else if (effort == "none" || effort == "minimal" || effort == "low" || effort == "medium" || effort == "high")
        chat["reasoning_effort"] = effort;
      else
        throw bad_field("reasoning.effort", "must be none, minimal, low, medium, high or xhigh");
    }
  }
  json format = {{"type", "text"}};
  if (const json* v = field(body, "text")) {
    if (!v->is_object()) throw bad_field("text", "must be an object");
    if (const json* f = field(*v, "format")) {
      const std::string type = f->is_object() ? f->value("type", "") : "";
      if (type == "json_object")
        chat["response_format"] = {{"type", "json_object"}};
      else if (type == "json_schema")
        throw ApiError(400, "'text.format': json_schema is not supported yet; use json_object", "invalid_request_error",
                       "text.format");
      else if (type != "text")
        throw bad_field("text.format", "type must be text or json_object");
      format = *f;
    }
  }

  try {
    r.api = parse_chat_request(chat, engine, content_tokens_as_text);
  } catch (const ApiError& e) {
    // a Chat Completions name in the message would puzzle this API's client
    std::string msg = e.what();
    if (auto at = msg.find("'max_tokens'"); at != std::string::npos) msg.replace(at, 12, "'max_output_tokens'");
    throw ApiError(e.status(), msg, "invalid_request_error");
  }
  const SamplingParams& s = r.api.params.sampling;
  r.echo = {{"instructions", instructions.empty() ? json() : json(instructions)},
            {"max_output_tokens", field(body, "max_output_tokens") ? body["max_output_tokens"] : json()},
            {"metadata", field(body, "metadata") ? body["metadata"] : json::object()},
            {"parallel_tool_calls", r.api.parallel_tool_calls},
            {"previous_response_id", r.previous_response_id.empty() ? json() : json(r.previous_response_id)},
            {"reasoning", {{"effort", effort.empty() ? json() : json(effort)}, {"summary", nullptr}}},
            {"store", r.store},
            {"temperature", s.temperature},
            {"text", {{"format", format}}},
            {"tool_choice", field(body, "tool_choice") ? body["tool_choice"] : json("auto")},
            {"tools", field(body, "tools") ? body["tools"] : json::array()},
            {"top_p", s.top_p},
            {"truncation", "disabled"}};
  return r;
}
}  // namespace

ResponsesRequest parse_responses_request(const json& body, const Engine& engine, ResponseStore& store,
                                         bool content_tokens_as_text) {
  return json_type_errors_as_400(
      [&] { return parse_responses_request_fields(body, engine, store, content_tokens_as_text); });
}

ResponsesFormat::ResponsesFormat(std::shared_ptr<const ResponsesRequest> req, const Engine& engine, std::string model,
                                 ResponseStore* store)
    : req_(std::move(req)),
      engine_(engine),
      model_(std::move(model)),
      id_(random_id("resp_")),
      created_(unix_seconds()),
      store_(store),
      blocks_(req_->api, [](AnswerBlock::Kind k) {
        return random_id(k == AnswerBlock::Kind::Reasoning ? "rs_" : k == AnswerBlock::Kind::Text ? "msg_" : "fc_");
      }) {}

std::string ResponsesFormat::event(const std::string& type, json fields) {
  json e = {{"type", type}, {"sequence_number", sequence_++}};
  for (auto& [k, v] : fields.items()) e[k] = std::move(v);
  return sse_event(type, e);
}

json ResponsesFormat::part(size_t index) const {
  const AnswerBlock& b = blocks_.blocks()[index];
  if (b.kind == AnswerBlock::Kind::Reasoning) return {{"type", "reasoning_text"}, {"text", b.text}};
  return {{"type", "output_text"}, {"text", b.text}, {"annotations", json::array()}, {"logprobs", json::array()}};
}

json ResponsesFormat::item(size_t index, bool done) const {
  const AnswerBlock& b = blocks_.blocks()[index];
  const char* status = done ? "completed" : "in_progress";
  switch (b.kind) {
    case AnswerBlock::Kind::Reasoning:
      return {{"type", "reasoning"},
              {"id", b.id},
              {"summary", json::array()},
              {"content", done ? json::array({part(index)}) : json::array()},
              {"status", status}};
    case AnswerBlock::Kind::Text:
      return {{"type", "message"},
              {"id", b.id},
              {"status", status},
              {"role", "assistant"},
              {"content", done ? json::array({part(index)}) : json::array()}};
    case AnswerBlock::Kind::ToolCall:
      return {{"type", "function_call"},
              {"id", b.id},
              {"call_id", b.call_id},
              {"name", b.call.name},
              {"arguments", done ? b.arguments() : ""},
              {"status", status}};
  }
  return {};
}

json ResponsesFormat::response_object(const std::string& status, const JobEvent* done) const {
  json r = {{"id", id_},        {"object", "response"},          {"created_at", created_}, {"status", status},
            {"error", nullptr}, {"incomplete_details", nullptr}, {"model", model_}};
  json output = json::array();
  if (done)
    for (size_t i = 0; i < blocks_.blocks().size(); ++i) output.push_back(item(i, true));
  r["output"] = output;
  for (const auto& [k, v] : req_->echo.items()) r[k] = v;
  if (done) {
    if (done->finish_reason == "length") r["incomplete_details"] = {{"reason", "max_output_tokens"}};
    const std::string reasoning = blocks_.reasoning();
    const int64_t reasoning_tokens =
        reasoning.empty() ? 0 : static_cast<int64_t>(engine_.tokenizer().encode(reasoning).size());
    r["usage"] = {
        {"input_tokens", done->prompt_tokens},
        {"input_tokens_details", {{"cached_tokens", done->cached_tokens}}},
        {"output_tokens", done->completion_tokens},
        {"output_tokens_details", {{"reasoning_tokens", std::min(reasoning_tokens, done->completion_tokens)}}},
        {"total_tokens", done->prompt_tokens + done->completion_tokens}};
  } else {
    r["usage"] = nullptr;
  }
  return r;
}

void ResponsesFormat::finish(const JobEvent& done) {
  final_ = response_object(done.finish_reason == "length" ? "incomplete" : "completed", &done);
  if (!store_ || !req_->store) return;
  // the follow-up sees this answer as the assistant's turn
  json turn = {{"role", "assistant"}, {"content", blocks_.text()}};
  if (const std::string r = blocks_.reasoning(); !r.empty()) turn["reasoning_content"] = r;
  json calls = json::array();
  for (const AnswerBlock& b : blocks_.blocks())
    if (b.kind == AnswerBlock::Kind::ToolCall)
      calls.push_back({{"id", b.call_id},
                       {"type", "function"},
                       {"function", {{"name", b.call.name}, {"arguments", b.call.arguments}}}});
  if (!calls.empty()) turn["tool_calls"] = calls;
  StoredResponse s{req_->conversation, final_};
  s.conversation.push_back(std::move(turn));
  store_->put(id_, std::move(s));
}

std::string ResponsesFormat::frames(const JobEvent& ev) {
  std::string out;
  if (!opened_) {
    opened_ = true;
    const json r = response_object("in_progress", nullptr);
    out += event("response.created", {{"response", r}});
    out += event("response.in_progress", {{"response", r}});
  }
  for (const BlockEvent& be : blocks_.take(ev)) {
    const AnswerBlock& b = blocks_.blocks()[be.index];
    const json at = {{"item_id", b.id}, {"output_index", be.index}};
    auto with = [&](json extra) {
      json f = at;
      for (auto& [k, v] : extra.items()) f[k] = std::move(v);
      return f;
    };
    const bool call = b.kind == AnswerBlock::Kind::ToolCall;
    const bool reasoning = b.kind == AnswerBlock::Kind::Reasoning;
    const std::string text_kind = reasoning ? "response.reasoning_text" : "response.output_text";
    switch (be.kind) {
      case BlockEvent::Kind::Open:
        out += event("response.output_item.added", {{"output_index", be.index}, {"item", item(be.index, false)}});
        if (!call) {
          json p = part(be.index);
          p["text"] = "";
          out += event("response.content_part.added", with({{"content_index", 0}, {"part", p}}));
        }
        break;
      case BlockEvent::Kind::Delta:
        if (call)
          out += event("response.function_call_arguments.delta", with({{"delta", be.delta}}));
        else if (reasoning)
          out += event(text_kind + ".delta", with({{"content_index", 0}, {"delta", be.delta}}));
        else
          out += event(text_kind + ".delta",
                       with({{"content_index", 0}, {"delta", be.delta}, {"logprobs", json::array()}}));
        break;
      case BlockEvent::Kind::Close:
        if (call) {
          out += event("response.function_call_arguments.done",
                       with({{"name", b.call.name}, {"arguments", b.arguments()}}));
        } else {
          json done = with({{"content_index", 0}, {"text", b.text}});
          if (!reasoning) done["logprobs"] = json::array();
          out += event(text_kind + ".done", done);
          out += event("response.content_part.done", with({{"content_index", 0}, {"part", part(be.index)}}));
        }
        out += event("response.output_item.done", {{"output_index", be.index}, {"item", item(be.index, true)}});
        break;
    }
  }
  if (ev.kind == JobEvent::Kind::Done) {
    finish(ev);
    out +=
        event(final_["status"] == "completed" ? "response.completed" : "response.incomplete", {{"response", final_}});
  }
  return out;
}

std::string ResponsesFormat::error_frames(const ApiError& e) {
  json r = response_object("failed", nullptr);
  r["error"] = {{"code", e.status() == 504 ? "timeout" : "server_error"}, {"message", e.what()}};
  return event("response.failed", {{"response", r}});
}

json ResponsesFormat::whole(const JobEvent&) { return final_; }

}  // namespace lily::server
