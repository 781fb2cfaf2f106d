#include "lily/server/openai_response.h"

#include <chrono>
#include <random>

#include "lily/server/api_error.h"

namespace lily::server {

using json = nlohmann::ordered_json;

std::string random_id(const std::string& prefix) {
  static thread_local std::mt19937_64 rng(std::random_device{}());
  static const char* digits = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  std::string s = prefix;
  for (int i = 0; i < 24; ++i) s += digits[rng() % 62];
  return s;
}

AnswerBuilder::AnswerBuilder(const ApiRequest& req, const Engine& engine, std::string model_name)
    : req_(req),
      engine_(engine),
      model_(std::move(model_name)),
      id_(random_id(req.chat ? "chatcmpl-" : "cmpl-")),
      created_(std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
                   .count()),
      parser_(req.reasoning, req.tools) {
  // the prompt already holds the start of a forced call: the parser must see it too
  if (!req.forced_prefix.empty()) parser_.push(req.forced_prefix);
}

json AnswerBuilder::chunk(json fields) const {
  json choice = {{"index", 0}};
  for (auto& [k, v] : fields.items()) choice[k] = v;
  if (!choice.contains("finish_reason")) choice["finish_reason"] = nullptr;
  return {{"id", id_},
          {"object", req_.chat ? "chat.completion.chunk" : "text_completion"},
          {"created", created_},
          {"model", model_},
          {"system_fingerprint", "lily"},
          {"choices", json::array({choice})}};
}

json AnswerBuilder::logprob_entries(const std::vector<TokenLogprob>& lps) const {
  const Tokenizer& tok = engine_.tokenizer();
  auto entry = [&](int32_t id, float lp) {
    const std::string b = tok.token_bytes(id);
    json bytes = json::array();
    for (unsigned char c : b) bytes.push_back(c);
    return json{{"token", b}, {"logprob", lp}, {"bytes", bytes}};
  };
  if (req_.chat) {
    json content = json::array();
    for (const auto& l : lps) {
      json e = entry(l.token, l.logprob);
      json top = json::array();
      for (const auto& [id, lp] : l.top) top.push_back(entry(id, lp));
      e["top_logprobs"] = top;
      content.push_back(e);
    }
    return {{"content", content}};
  }
  // the legacy completions form
  json tokens = json::array(), token_lps = json::array(), tops = json::array(), offsets = json::array();
  for (const auto& l : lps) {
    tokens.push_back(tok.token_bytes(l.token));
    token_lps.push_back(l.logprob);
    json top = json::object();
    for (const auto& [id, lp] : l.top) top[tok.token_bytes(id)] = lp;
    tops.push_back(top);
  }
  return {{"tokens", tokens}, {"token_logprobs", token_lps}, {"top_logprobs", tops}, {"text_offset", offsets}};
}

void AnswerBuilder::take(const ParsedDelta& d, json& delta) {
  if (!d.reasoning.empty()) {
    reasoning_ += d.reasoning;
    delta["reasoning_content"] = d.reasoning;
  }
  if (!d.content.empty()) {
    content_ += d.content;
    delta["content"] = d.content;
  }
  json calls = json::array();
  for (const ToolCall& c : d.tool_calls) {
    if (!req_.parallel_tool_calls && !calls_.empty()) break;  // one call at most was asked for
    calls_.push_back(c);
    calls.push_back({{"index", calls_.size() - 1},
                     {"id", random_id("call_")},
                     {"type", "function"},
                     {"function", {{"name", c.name}, {"arguments", c.arguments.dump()}}}});
  }
  if (!calls.empty()) delta["tool_calls"] = calls;
}

std::vector<json> AnswerBuilder::chunks(const JobEvent& ev) {
  std::vector<json> out;
  if (req_.chat && !opened_ && req_.stream) out.push_back(chunk({{"delta", {{"role", "assistant"}, {"content", ""}}}}));
  opened_ = true;
  logprobs_.insert(logprobs_.end(), ev.logprobs.begin(), ev.logprobs.end());
  json lp = ev.logprobs.empty() || !req_.logprobs ? json() : logprob_entries(ev.logprobs);
  if (!req_.chat) {
    content_ += ev.text;
    if (!ev.text.empty() || !lp.is_null()) out.push_back(chunk({{"text", ev.text}, {"logprobs", lp}}));
    return out;
  }
  json delta = json::object();
  take(ev.kind == JobEvent::Kind::Done ? parser_.finish() : parser_.push(ev.text), delta);
  if (!delta.empty() || !lp.is_null()) out.push_back(chunk({{"delta", delta}, {"logprobs", lp}}));
  return out;
}

std::string AnswerBuilder::frames(const JobEvent& ev) {
  std::string out;
  for (const json& c : chunks(ev)) out += sse_event("", c);
  if (ev.kind == JobEvent::Kind::Done) {
    for (const json& c : closing_chunks(ev)) out += sse_event("", c);
    out += "data: [DONE]\n\n";
  }
  return out;
}

std::string AnswerBuilder::error_frames(const ApiError& e) { return sse_event("", e.body()) + "data: [DONE]\n\n"; }

std::string AnswerBuilder::finish_reason(const JobEvent& done) const {
  if (done.finish_reason == "length") return "length";
  return calls_.empty() ? "stop" : "tool_calls";
}

json AnswerBuilder::usage(const JobEvent& done) const {
  return {{"prompt_tokens", done.prompt_tokens},
          {"completion_tokens", done.completion_tokens},
          {"total_tokens", done.prompt_tokens + done.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", done.cached_tokens}}}};
}

json AnswerBuilder::timings(const JobEvent& done) {
  const int64_t prompt_n = done.prompt_tokens - done.cached_tokens;
  auto per_second = [](int64_t n, double s) { return s > 0 ? double(n) / s : 0.0; };
  return {{"prompt_n", prompt_n},
          {"prompt_ms", done.prefill_seconds * 1000},
          {"prompt_per_second", per_second(prompt_n, done.prefill_seconds)},
          {"predicted_n", done.completion_tokens},
          {"predicted_ms", done.decode_seconds * 1000},
          {"predicted_per_second", per_second(done.completion_tokens, done.decode_seconds)}};
}

std::vector<json> AnswerBuilder::closing_chunks(const JobEvent& done) {
  std::vector<json> out;
  json fields = {{"finish_reason", finish_reason(done)}};
  if (req_.chat) fields["delta"] = json::object();
  else fields["text"] = "";
  out.push_back(chunk(fields));
  if (req_.include_usage) {
    json u = chunk({});
    u["choices"] = json::array();
    u["usage"] = usage(done);
    u["timings"] = timings(done);
    out.push_back(u);
  }
  return out;
}

json AnswerBuilder::response(const JobEvent& done) {
  json choice = {{"index", 0}};
  if (req_.chat) {
    json msg = {{"role", "assistant"}, {"content", content_.empty() && !calls_.empty() ? json() : json(content_)}};
    if (!reasoning_.empty()) msg["reasoning_content"] = reasoning_;
    if (!calls_.empty()) {
      json calls = json::array();
      for (const ToolCall& c : calls_)
        calls.push_back({{"id", random_id("call_")},
                         {"type", "function"},
                         {"function", {{"name", c.name}, {"arguments", c.arguments.dump()}}}});
      msg["tool_calls"] = calls;
    }
    choice["message"] = msg;
  } else {
    choice["text"] = content_;
  }
  choice["logprobs"] = req_.logprobs ? logprob_entries(logprobs_) : json();
  choice["finish_reason"] = finish_reason(done);
  return {{"id", id_},
          {"object", req_.chat ? "chat.completion" : "text_completion"},
          {"created", created_},
          {"model", model_},
          {"system_fingerprint", "lily"},
          {"choices", json::array({choice})},
          {"usage", usage(done)},
          {"timings", timings(done)}};
}

}  // namespace lily::server
